--[[
slurm-green job_submit.lua: opt-in, trusted marker and guard for green-scheduled jobs.

At submission it
  * reads the user's green options from --comment ("green:flex=6h,gpus=2-8,cap=yes,share=no",
    "green:elastic=requeue,gpus=1-4" or "green:off"), accepting and rejecting exactly what
    find_user_options and parse_user_options of slurm_green.core.green_options do,
  * makes an elastic job requeueable (requeue = 1, as --requeue), so that the controller
    may checkpoint-and-requeue it at another GPU count even where JobRequeue=0; a job the
    user submitted with --no-requeue keeps it and is not elastic (the user is told),
  * writes the normalised marker (format_marker) into AdminComment, which users cannot
    change (with own_nodes=1 where the user gave -w, -x, -C or --reservation, array=1 for an
    array), and defers the job to its deadline (begin_time) so that it still starts in
    time when the controller is down; the controller moves it earlier (a job in a
    reservation is not deferred: its reservation's nodes wait for it),
  * strips any decision token ("sg1.<body>.<mac>") from the user's own comment,
  * leaves a heterogeneous job's components alone (not marked, not deferred: they start together).
On update it keeps users from changing what only the controller decides for a managed job:
StartTime, Comment (the decision channel), the GPUs in every form (TresPerJob/Node/Task/
Socket, Gres), NumNodes, NumTasks (the GPU count of a --gpus-per-task job), ReqNodeList, ExcNodeList, and TresFreq where the site enacts
decisions as GPU frequencies. The refusal returns ESLURM_ACCESS_DENIED, whose text is all
that reaches the user on Slurm 22.05 (it drops log_user messages of job_modify).

It never rejects or delays a job through its own failure: every entry point runs under
pcall, logs with slurm.log_error and lets the job through. Only invalid user input is
refused, with a slurm.log_user message that says what is allowed.

Written for Lua 5.1 (Debian's job_submit/lua plugin); see docs/enactment.md.
]]

------------------------------------------------------------------------------------------
-- Site settings
------------------------------------------------------------------------------------------
local SETTINGS = {
    -- Longest flexibility a user may grant (seconds); flex=999d is refused above this.
    max_flex_s = 72 * 3600,
    -- Whether GPU jobs without any "green:" option are managed (false: users opt in with
    -- --comment green:...; true: every GPU batch job is, unless it says green:off), and
    -- the flexibility they are given (0: the controller may pick GPU count and cap but
    -- not delay them).
    manage_unmarked_gpu_jobs = false,
    default_flex_s = 0,
    -- The controller's account: only it (and root / SlurmUser) may change the fields it
    -- decides for a managed job (see GUARDED). Resolved to a uid once, at load.
    controller_user = "sgreen",
    controller_uid = nil, -- a number here skips the lookup
    slurm_user = "slurm",
    passwd_file = "/etc/passwd",
    -- Set to true when the site enacts decisions as --gpu-freq (TresFreq) instead of
    -- power caps (gpu enactment = gpu_freq): then TresFreq is guarded as well.
    guard_tres_freq = false,
    -- Set to true while the controller runs with dry_run = true: jobs are still marked (so
    -- the controller sees what it would manage), but nothing users see changes: no
    -- deferral to the deadline (a dry-run controller never moves a job earlier, so jobs
    -- would wait their whole flex) and no guard on their own updates.
    dry_run = false,
}

------------------------------------------------------------------------------------------
-- Mirror of slurm_green/core/green_options.py (keep the two in step; the unit tests
-- compare them on random inputs).
------------------------------------------------------------------------------------------
local USER_PREFIX = "green:"
local MARKER_PREFIX = "sg:"
local NO_VAL = 4294967294 -- Slurm's "unset" for a uint32 job_desc field (NO_VAL)
local UNIT_S = { [""] = 3600, s = 1, m = 60, h = 3600, d = 86400 }
local YES = { yes = true, y = true, ["1"] = true, ["true"] = true, on = true }
local NO = { no = true, n = true, ["0"] = true, ["false"] = true, off = true }
-- CPython refuses int() of more digits than this (leading zeros count).
local PY_INT_MAX_DIGITS = 4300
-- green_options.MAX_GPUS, as a canonical digit string (compared with int_less).
local MAX_GPUS = "1000000"
-- The token regex of decision_token.py: sg1\.[A-Za-z0-9_-]+\.[0-9a-f]{64}
local TOKEN_PATTERN = "sg1%.[A-Za-z0-9_%-]+%." .. string.rep("[0-9a-f]", 64)
-- Python's str.split() also splits on these (as UTF-8): U+0085, U+00A0, U+1680,
-- U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
local UNICODE_SPACES = {
    "\194\133", "\194\160", "\225\154\128", "\226\128[\128-\138]", "\226\128\168",
    "\226\128\169", "\226\128\175", "\226\129\159", "\227\128\128",
}
local ASCII_WORD = "[^%s\28-\31]+" -- Python's ASCII whitespace includes \x1c-\x1f

-- Python's str.strip() of ASCII whitespace, in linear time: a trailing-space pattern
-- ("[%s]+$") would retry at every run of spaces, quadratic in a user's comment, and this runs
-- under slurmctld's job lock (a 128 KiB comment took minutes).
local function strip(s)
    local first = s:find("[^%s\28-\31]")
    if not first then return "" end
    local last = #s
    while s:find("^[%s\28-\31]", last) do last = last - 1 end
    return s:sub(first, last)
end

local function words(text)
    if text:find("[\128-\255]") then
        for _, space in ipairs(UNICODE_SPACES) do
            text = text:gsub(space, " ")
        end
    end
    return text:gmatch(ASCII_WORD)
end

-- A parse error: a message for the user, raised with error() as a table so that it is
-- told apart from a bug in this file.
local function invalid(message)
    error({ user_message = message }, 0)
end

local KEYS = { flex = true, gpus = true, cap = true, share = true, elastic = true }
local KEY_LIST = "flex, gpus, cap, share, elastic" -- in green_options.KEYS order

-- Whether a word holds a KEY=VALUE item of ours ("gpus=2", ",cap=no").
local function names_a_key(word)
    for item in (word .. ","):gmatch("([^,]*),") do
        local eq = item:find("=", 1, true)
        if eq and KEYS[strip(item:sub(1, eq - 1)):lower()] then return true end
    end
    return false
end

-- The text of the comment's green: word, or nil. Options spread over several words are
-- refused rather than read in part ("green:flex=6h gpus=2" would drop gpus=2).
local function find_user_options(comment)
    local all, found = {}, {}
    for word in words(comment) do
        all[#all + 1] = word
        if word:sub(1, #USER_PREFIX):lower() == USER_PREFIX then found[#found + 1] = #all end
    end
    if #found == 0 then return nil end
    if #found > 1 then
        invalid(string.format("%d 'green:' words: give every option in one, joined by commas", #found))
    end
    for index, word in ipairs(all) do
        if index ~= found[1] and names_a_key(word) then
            invalid(string.format("'%s' is outside the green: word: join options with commas, no spaces", word))
        end
    end
    return all[found[1]]:sub(#USER_PREFIX + 1)
end

local function parse_duration(text)
    local value = strip(text):lower()
    local number, unit = value:match("^(%d+)([smhd]?)$")
    if not number then
        number, unit = value:match("^(%d+%.%d+)([smhd]?)$")
    end
    if not number then
        invalid(string.format("flex='%s': expected a non-negative duration such as 30m, 6h or 1d", text))
    end
    return tonumber(number) * UNIT_S[unit]
end

local function parse_bool(key, text)
    local value = strip(text):lower()
    if YES[value] then return true end
    if NO[value] then return false end
    invalid(string.format("%s='%s': expected yes or no", key, text))
end

-- Integers of any length, as Python compares them: canonical digit strings.
local function canonical_int(digits, text)
    if #digits > PY_INT_MAX_DIGITS then
        invalid(string.format("gpus='%s': number too long", text))
    end
    local trimmed = digits:gsub("^0+", "")
    return trimmed == "" and "0" or trimmed
end

local function int_less(a, b)
    if #a ~= #b then return #a < #b end
    return a < b
end

local function parse_gpu_range(text)
    local value = strip(text)
    local low, high = value:match("^(%d+)%-(%d+)$")
    if not low then
        low = value:match("^(%d+)$")
        high = low
    end
    if not low then
        invalid(string.format("gpus='%s': expected a count or a range such as 2-8", text))
    end
    low, high = canonical_int(low, text), canonical_int(high, text)
    if low == "0" or int_less(high, low) then
        invalid(string.format("gpus='%s': expected 1 <= MIN <= MAX", text))
    end
    if int_less(MAX_GPUS, high) then
        invalid(string.format("gpus='%s': at most %s GPUs", text, MAX_GPUS))
    end
    return low, high
end

local function parse_elastic(text)
    local value = strip(text):lower()
    if value == "requeue" then return true end
    if NO[value] then return false end
    invalid(string.format("elastic='%s': expected requeue or no", text))
end

local function default_options()
    return { managed = true, flex_s = 0, accept_cap = true, accept_share = false, elastic = false }
end

local function parse_user_options(text)
    text = strip(text)
    if NO[text:lower()] then
        local options = default_options()
        options.managed = false
        return options
    end
    local options, seen = default_options(), {}
    for part in (text .. ","):gmatch("([^,]*),") do
        local item = strip(part)
        if item ~= "" then
            local eq = item:find("=", 1, true)
            local key = strip(eq and item:sub(1, eq - 1) or item):lower()
            local value = eq and item:sub(eq + 1) or ""
            if eq and seen[key] then
                invalid(string.format("'%s' given twice: give each of %s at most once", key, KEY_LIST))
            end
            if eq then seen[key] = true end
            if not eq and (key == "on" or key == "yes") then
                -- a bare "on"/"yes" only confirms the opt-in
            elseif not eq then
                invalid(string.format("'%s': expected KEY=VALUE with KEY one of %s", item, KEY_LIST))
            elseif key == "flex" then
                local delay = parse_duration(value)
                if delay > SETTINGS.max_flex_s then
                    invalid(string.format("flex=%s: this site allows at most %gh", value, SETTINGS.max_flex_s / 3600))
                end
                options.flex_s = delay
            elseif key == "gpus" then
                options.gpus_min, options.gpus_max = parse_gpu_range(value)
            elseif key == "cap" then
                options.accept_cap = parse_bool(key, value)
            elseif key == "share" then
                options.accept_share = parse_bool(key, value)
            elseif key == "elastic" then
                options.elastic = parse_elastic(value)
            else
                invalid(string.format("unknown key '%s': allowed are %s", key, KEY_LIST))
            end
        end
    end
    return options
end

-- The options of a submitted comment: nil without a green: word; invalid() when malformed.
local function read_user_options(comment)
    local text = find_user_options(comment)
    return text and parse_user_options(text)
end

local function format_marker(options)
    local fields = {
        "managed=" .. (options.managed and 1 or 0),
        string.format("flex=%d", math.floor(options.flex_s)),
        "cap=" .. (options.accept_cap and 1 or 0),
        "share=" .. (options.accept_share and 1 or 0),
    }
    if options.gpus_min then
        fields[#fields + 1] = "gmin=" .. options.gpus_min
        fields[#fields + 1] = "gmax=" .. options.gpus_max
    end
    if options.deadline then
        fields[#fields + 1] = string.format("deadline=%d", math.floor(options.deadline))
    end
    if options.elastic then
        fields[#fields + 1] = "elastic=1" -- only when true: other markers stay as they were
    end
    if options.time_limit_s then
        fields[#fields + 1] = string.format("limit=%d", options.time_limit_s)
    end
    if options.earliest then
        fields[#fields + 1] = string.format("begin=%d", math.floor(options.earliest))
    end
    if options.own_nodes then
        fields[#fields + 1] = "own_nodes=1"
    end
    if options.array then
        fields[#fields + 1] = "array=1"
    end
    if options.tasks then
        fields[#fields + 1] = string.format("tasks=%d", options.tasks)
    end
    return MARKER_PREFIX .. table.concat(fields, ";")
end

------------------------------------------------------------------------------------------
-- Jobs
------------------------------------------------------------------------------------------

-- Does a TRES string ask for at least one GPU? Seen forms: "gres/gpu:2" (23.02+),
-- "gres:gpu:2" (22.05), "gpu:a100:2", "gres/gpu" (one), "cpu:4,gres/gpu:1" (per task).
local function asks_for_gpu(tres)
    if not tres or not tres:find("gpu", 1, true) then return false end
    for item in tres:gmatch("[^,]+") do
        local name = strip(item):gsub("^gres[/:]", "")
        if name == "gpu" then return true end
        if name:sub(1, 4) == "gpu:" or name:sub(1, 4) == "gpu=" then
            local count = name:match("[:=](%d+)$")
            if not count or tonumber(count) > 0 then return true end
        end
    end
    return false
end

local function is_gpu_job(job_desc)
    return asks_for_gpu(job_desc.tres_per_node) or asks_for_gpu(job_desc.tres_per_job)
        or asks_for_gpu(job_desc.tres_per_task) or asks_for_gpu(job_desc.tres_per_socket)
end

local function strip_tokens(text)
    return strip((text:gsub(TOKEN_PATTERN, " ")))
end

local function with_marker(admin_comment, marker)
    local kept = {}
    for word in (admin_comment or ""):gmatch("%S+") do
        if word:sub(1, #MARKER_PREFIX) ~= MARKER_PREFIX then kept[#kept + 1] = word end
    end
    kept[#kept + 1] = marker
    return table.concat(kept, " ")
end

local function marker_says_managed(admin_comment)
    if not admin_comment then return false end
    for word in admin_comment:gmatch("%S+") do
        if word:sub(1, #MARKER_PREFIX) == MARKER_PREFIX then
            -- as parse_marker: managed unless the field says otherwise than "1"
            local managed = (word .. ";"):match("[:;]managed=([^;]*);")
            return managed == nil or managed == "1"
        end
    end
    return false
end

local ALLOWED_HINT = 'allowed: --comment "green:flex=6h,gpus=2-8,cap=yes,share=no" (flex up to %gh; '
    .. 'units s, m, h, d; gpus a count or MIN-MAX; cap and share yes or no; elastic requeue or no) '
    .. 'or --comment "green:off"'

-- An elastic job must be requeueable: set requeue = 1 (as --requeue) unless the user
-- said --no-requeue (requeue == 0), which stands; that job is then not elastic
-- (green_options.on_arrival and plugin_requeue). Without either flag requeue reads
-- NO_VAL16 (65534, slurm_init_job_desc_msg); job_submit/lua reads and sets it as a number.
local function settle_elastic(job_desc, options)
    if not options.elastic then return end
    local requeue = tonumber(job_desc.requeue)
    if requeue == 0 then
        options.elastic = false
        slurm.log_user("%s", "slurm-green: elastic=requeue ignored: the job was submitted with --no-requeue, "
            .. "so it keeps its size while it runs (leave out --no-requeue to make it elastic)")
    elseif requeue ~= 1 and not SETTINGS.dry_run then
        job_desc.requeue = 1
    end
end

local function on_submit(job_desc)
    local comment = job_desc.comment
    local options
    if comment then
        if comment:find(TOKEN_PATTERN) then
            comment = strip_tokens(comment)
            job_desc.comment = comment
            slurm.log_info("%s", "slurm-green: removed a decision token from a submitted comment")
        end
        local ok, result = pcall(read_user_options, comment)
        if not ok then
            if type(result) == "table" and result.user_message then
                slurm.log_user("%s", "slurm-green: " .. result.user_message .. "; "
                    .. string.format(ALLOWED_HINT, SETTINGS.max_flex_s / 3600))
                return slurm.ERROR
            end
            error(result, 0)
        end
        options = result
    end
    if not options then
        if not (SETTINGS.manage_unmarked_gpu_jobs and is_gpu_job(job_desc) and job_desc.script) then
            return slurm.SUCCESS
        end
        options = default_options()
        options.flex_s = SETTINGS.default_flex_s
    end
    -- A heterogeneous job's components (sbatch ... : ..., #SBATCH hetjob) are submitted one by
    -- one and start together: a size or pin on one is refused ("Job resizing not supported",
    -- 24.11) and its start with it, and a start decided for each alone binds none. Such a job
    -- is left to Slurm: not marked, not deferred. het_job_offset is NO_VAL for any other job.
    local offset = tonumber(job_desc.het_job_offset)
    if offset and offset < NO_VAL then
        if options.managed then
            slurm.log_user("%s", "slurm-green: a heterogeneous job is not green-scheduled; "
                .. "it starts as Slurm schedules it")
        end
        return slurm.SUCCESS
    end
    settle_elastic(job_desc, options)
    -- The limit as submitted (--time, minutes; NO_VAL: none given, INFINITE: UNLIMITED), kept
    -- where users cannot change it: the controller raises the limit of a job its decision
    -- slows from this figure, never from one it raised (green_options.submitted_limit_s).
    local minutes = tonumber(job_desc.time_limit)
    if minutes and minutes > 0 and minutes < NO_VAL then
        options.time_limit_s = minutes * 60
    end
    -- A node list, excluded nodes, a constraint or a reservation (-w, -x, -C, --reservation) is
    -- the user's say over where the job runs: the marker's own_nodes=1, and the controller then
    -- decides no pin and no size.
    for _, field in ipairs({ "req_nodes", "exc_nodes", "features", "reservation" }) do
        local value = job_desc[field]
        if value ~= nil and value ~= "" then options.own_nodes = true end
    end
    -- A job in a reservation is not deferred: the reservation's nodes wait for it anyway, and a
    -- begin time past the reservation's end gets the job held (RESV_DEL_HOLD) when it ends.
    local reserved = job_desc.reservation ~= nil and job_desc.reservation ~= ""
    -- An array is one pending record to the controller: one pin or size would bind every task.
    if job_desc.array_inx ~= nil and job_desc.array_inx ~= "" then options.array = true end
    -- The task count the user gave (-n): the controller gives the job no more nodes than that.
    local tasks = tonumber(job_desc.num_tasks)
    if tasks and tasks > 0 and tasks < NO_VAL then options.tasks = math.floor(tasks) end
    if options.managed then
        local now = os.time()
        local begin = tonumber(job_desc.begin_time) or 0
        -- A user's own --begin stays the earliest start (the marker's begin=, before which the
        -- controller leaves the job alone); flex counts from there.
        local later = begin > now and begin < NO_VAL
        local base = later and begin or now
        if later then options.earliest = begin end
        options.deadline = base + options.flex_s
        if math.floor(options.deadline) > base and not SETTINGS.dry_run and not reserved then
            job_desc.begin_time = math.floor(options.deadline)
        end
    end
    job_desc.admin_comment = with_marker(job_desc.admin_comment, format_marker(options))
    return slurm.SUCCESS
end

local PRIVILEGED_UIDS = {}

-- What the controller decides, as the job_desc fields of an update (job_submit_lua.c,
-- 22.05 to 26.05; scontrol's names). A field the update leaves alone reads nil (strings;
-- "" clears one), 0 (begin_time) or NO_VAL (node and task counts). "gres" reads tres_per_node.
local GUARDED = {
    { "begin_time", "StartTime", "time" },
    { "comment", "Comment" },
    { "tres_per_job", "TresPerJob" },
    { "tres_per_node", "TresPerNode" },
    { "tres_per_task", "TresPerTask" },
    { "tres_per_socket", "TresPerSocket" },
    { "min_nodes", "NumNodes", "count" },
    { "max_nodes", "NumNodes", "count" },
    -- With --gpus-per-task the task count is the GPU count the controller decided.
    { "num_tasks", "NumTasks", "count" },
    { "req_nodes", "ReqNodeList" },
    { "exc_nodes", "ExcNodeList" },
}
local GUARDED_TRES_FREQ = { "tres_freq", "TresFreq" }

local function changes(job_desc, field)
    local value = job_desc[field[1]]
    if field[3] == "time" then return (tonumber(value) or 0) ~= 0 end
    if field[3] == "count" then return value ~= nil and tonumber(value) ~= NO_VAL end
    return value ~= nil
end

-- The names of the controller's fields this update would change, each once.
local function refused_fields(job_desc)
    local refused, named = {}, {}
    local function check(field)
        if not named[field[2]] and changes(job_desc, field) then
            refused[#refused + 1], named[field[2]] = field[2], true
        end
    end
    for _, field in ipairs(GUARDED) do check(field) end
    if SETTINGS.guard_tres_freq then check(GUARDED_TRES_FREQ) end
    return refused
end

local function on_modify(job_desc, job_rec, modify_uid)
    if PRIVILEGED_UIDS[tonumber(modify_uid)] then return slurm.SUCCESS end
    if SETTINGS.dry_run or not marker_says_managed(job_rec.admin_comment) then
        local comment = job_desc.comment
        if comment and comment:find(TOKEN_PATTERN) then
            job_desc.comment = strip_tokens(comment)
        end
        return slurm.SUCCESS
    end
    local refused = refused_fields(job_desc)
    if #refused == 0 then return slurm.SUCCESS end
    -- 22.05 drops log_user text in job_modify; what reaches the user there is the return
    -- code's message, so it must be a specific one ("Access/permission denied").
    slurm.log_user("%s", string.format(
        "slurm-green: job %s is green-scheduled; only the slurm-green controller may change its %s. "
            .. "To run it without green scheduling, cancel it and resubmit with --comment green:off.",
        tostring(job_rec.job_id), table.concat(refused, ", ")))
    return slurm.ESLURM_ACCESS_DENIED or slurm.ERROR
end

------------------------------------------------------------------------------------------
-- Privileged uids: root, SlurmUser and the controller, resolved once at load.
------------------------------------------------------------------------------------------
local function uid_of(name)
    local passwd = io.open(SETTINGS.passwd_file, "r")
    if passwd then
        for line in passwd:lines() do
            local user, uid = line:match("^([^:]*):[^:]*:(%d+):")
            if user == name then
                passwd:close()
                return tonumber(uid)
            end
        end
        passwd:close()
    end
    -- Directory services (LDAP, SSSD): ask once, at load only.
    if name:match("^[%w._-]+$") then
        local pipe = io.popen("id -u -- '" .. name .. "' 2>/dev/null")
        if pipe then
            local uid = tonumber(pipe:read("*l") or "")
            pipe:close()
            return uid
        end
    end
    return nil
end

local function resolve_privileged_uids()
    local uids = { [0] = true }
    local slurm_uid = uid_of(SETTINGS.slurm_user)
    if slurm_uid then uids[slurm_uid] = true end
    local controller_uid = SETTINGS.controller_uid or uid_of(SETTINGS.controller_user)
    if controller_uid then
        uids[controller_uid] = true
    else
        slurm.log_error("%s", "slurm-green: controller user '" .. SETTINGS.controller_user
            .. "' not found: only root and SlurmUser may change managed jobs")
    end
    PRIVILEGED_UIDS = uids
    return uids
end

------------------------------------------------------------------------------------------
-- Entry points
------------------------------------------------------------------------------------------
local function fail_open(where, err)
    pcall(slurm.log_error, "%s", "slurm-green: job_submit.lua " .. where .. " failed, job let through: "
        .. tostring(type(err) == "table" and err.user_message or err))
    return slurm.SUCCESS
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    local ok, rc = pcall(on_submit, job_desc)
    if ok then return rc end
    return fail_open("submit", rc)
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    local ok, rc = pcall(on_modify, job_desc, job_rec, modify_uid)
    if ok then return rc end
    return fail_open("modify", rc)
end

-- For tests and for an administrator's `lua` session; slurmctld ignores it.
slurm_green = {
    settings = SETTINGS,
    parse_user_options = parse_user_options,
    read_user_options = read_user_options,
    format_marker = format_marker,
    strip_tokens = strip_tokens,
    asks_for_gpu = asks_for_gpu,
    resolve_privileged_uids = resolve_privileged_uids,
}

local ok, err = pcall(resolve_privileged_uids)
if not ok then pcall(slurm.log_error, "%s", "slurm-green: uid lookup failed: " .. tostring(err)) end

return slurm.SUCCESS
