"""Map whatever a Slurm job is called (``resnet50``, ``train_imagenet.sh``, ``LM bs=40``)
to one of the modelled job types, or ``None`` when nothing matches.

Rules, in order: an exact match after normalising (lower case, alphanumerics only);
else a known model family found among the name's tokens, with the batch size taken
from ``bs64`` / ``batch_size=64`` / ``(batch size 64)`` when present (nearest measured
batch), else the family's default type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# family keyword -> (canonical type prefix, default batch size or None for unbatched types)
# Gavel families carry a batch size in their type name; the rest name one type.
FAMILIES: dict[str, tuple[str, int | None]] = {
    "resnet50": ("ResNet-50", 64),
    "rn50": ("ResNet-50", 64),
    "resnet18": ("ResNet-18", 64),
    "rn18": ("ResNet-18", 64),
    "transformer": ("Transformer", 64),
    "languagemodel": ("LM", 20),
    "lstm": ("LM", 20),
    "lm": ("LM", 20),
    "recommendation": ("Recommendation", 2048),
    "recsys": ("Recommendation", 2048),
    "cyclegan": ("CycleGAN", None),
    "a3c": ("A3C", None),
    "imagenet": ("imagenet", None),
    "cifar10": ("cifar10", None),
    "cifar": ("cifar10", None),
    "deepspeech2": ("deepspeech2", None),
    "deepspeech": ("deepspeech2", None),
    "ncf": ("ncf", None),
    "bertbaseuncased": ("zeus:bert_base_uncased", None),
    "bert": ("bert", None),
    "yolov3": ("yolov3", None),
    "yolo": ("yolov3", None),
    "shufflenetv2": ("zeus:shufflenetv2", None),
    "shufflenet": ("zeus:shufflenetv2", None),
}
#: What a job whose name matches no modelled type is planned with (``params.default``: docs/models.md).
DEFAULT_MODEL = ("the conservative default model (scaling no better than the median measured type's, "
                 "median cap response)")
#: A job name quoted in a note is cut to this many characters: the note is stored with the job's
#: decisions, and a name is whatever its user wrote (``why`` shows it whole on its first line).
NOTE_NAME_CHARS = 64
_SHORT_TOKEN_ONLY = {"lm"}  # too short to search inside other words ("film", "llm")
_BATCH = re.compile(r"(?:batch[\s_-]*size|bsz|bs|b)[\s=_:-]*(\d+)", re.IGNORECASE)
_GAVEL_BATCH = re.compile(r"^(.*) \(batch size (\d+)\)$")


def normalise(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def unmodelled(name: str | None) -> str:
    """Why the job ``name`` (``NameResolver.resolve`` found no type for it) gets the default model,
    quoting it: user text, kept as written, escaped where printed (``core.text.terminal_safe``)."""
    if not name:
        return f"the job has no name: {DEFAULT_MODEL}"
    shown = name if len(name) <= NOTE_NAME_CHARS else name[:NOTE_NAME_CHARS] + "..."
    return f"job name '{shown}' matches no modelled job type: {DEFAULT_MODEL}"


class NameResolver:
    """Resolves job names against a fixed set of known types (built once per registry)."""

    def __init__(self, known: Iterable[str]) -> None:
        self._exact = {normalise(t): t for t in known}
        self._batched: dict[str, dict[int, str]] = {}
        for t in self._exact.values():
            m = _GAVEL_BATCH.match(t)
            if m:
                self._batched.setdefault(m.group(1), {})[int(m.group(2))] = t

    def resolve(self, name: str | None) -> str | None:
        if not name:
            return None
        exact = self._exact.get(normalise(name))
        if exact is not None:
            return exact
        tokens = [normalise(t) for t in re.split(r"[^A-Za-z0-9]+", name) if t]
        joined = normalise(name)
        for keyword in sorted(FAMILIES, key=len, reverse=True):
            hit = keyword in tokens if keyword in _SHORT_TOKEN_ONLY else keyword in joined
            if hit:
                return self._pick(keyword, name)
        return None

    def _pick(self, keyword: str, name: str) -> str | None:
        prefix, default_bs = FAMILIES[keyword]
        if default_bs is None:
            return self._exact.get(normalise(prefix))
        sizes = self._batched.get(prefix)
        if not sizes:
            return None
        m = _BATCH.search(name)
        wanted = int(m.group(1)) if m else default_bs
        return sizes[min(sizes, key=lambda s: (abs(s - wanted), s))]
