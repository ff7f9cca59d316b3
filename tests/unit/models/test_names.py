from __future__ import annotations

import pytest

from slurm_green.models.names import NameResolver

KNOWN = ["ResNet-50 (batch size 16)", "ResNet-50 (batch size 64)", "ResNet-50 (batch size 128)",
         "LM (batch size 20)", "LM (batch size 40)", "imagenet", "bert", "zeus:bert_base_uncased", "yolov3"]


@pytest.mark.parametrize(("name", "expected"), [
    ("resnet50", "ResNet-50 (batch size 64)"),
    ("ResNet-50 (batch size 128)", "ResNet-50 (batch size 128)"),
    ("resnet50_bs100", "ResNet-50 (batch size 128)"),
    ("train-rn50 --batch-size=16", "ResNet-50 (batch size 16)"),
    ("imagenet", "imagenet"),
    ("IMAGENET_train.sh", "imagenet"),
    ("lm_bs40", "LM (batch size 40)"),
    ("bert-large-finetune", "bert"),
    ("bert_base_uncased", "zeus:bert_base_uncased"),
    ("yolo", "yolov3"),
    ("film_render", None),
    ("", None),
    (None, None),
])
def test_resolves_slurm_job_names(name: str | None, expected: str | None) -> None:
    assert NameResolver(KNOWN).resolve(name) == expected
