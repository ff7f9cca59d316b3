--[[
Test harness for slurm_green/job_submit/job_submit.lua: a fake `slurm` table, the plugin loaded as
slurmctld loads it, and a line protocol on stdin/stdout so that pytest can drive one
Lua 5.1 process for many cases (see lua_plugin.py).

    lua5.1 harness.lua PATH/TO/job_submit.lua

Request: COMMAND then TAB-separated fields; a field is  s:NAME=HEX  (string, hex-encoded
bytes),  n:NAME=NUMBER,  b:NAME=0|1,  or  x:NAME=  (reading NAME raises an error, to
simulate a failing Slurm accessor). Names starting with "rec." go to job_rec (modify).
Commands: submit, modify, set (plugin settings), unexpose (slurm constants), parse
(comment), strip (text), resolve, bench (fields + n:iterations). Answer: one line, TAB-separated, same field encoding plus
log:LEVEL=HEX for every message the plugin logged.
]]

local function hex(s)
    return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(s)
    return (s:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end))
end

local logs = {}
local function logger(level)
    return function(fmt, ...)
        logs[#logs + 1] = { level, string.format(fmt, ...) }
    end
end

slurm = {
    SUCCESS = 0,
    ERROR = -1,
    ESLURM_ACCESS_DENIED = 2002, -- slurm_errno.h; exposed by job_submit/lua from 22.05 on
    log_info = logger("info"),
    log_debug = logger("debug"),
    log_error = logger("error"),
    log_user = logger("user"),
}

local real_time = os.time
local fake_now = nil
os.time = function(t)
    if t == nil and fake_now then return fake_now end
    return real_time(t)
end

local rc = dofile(arg[1])
assert(rc == slurm.SUCCESS, "the plugin must return slurm.SUCCESS when loaded")
local plugin = slurm_green

-- What a job_desc holds for fields a request leaves alone (slurm_init_job_desc_msg): an
-- update leaves node counts at NO_VAL; a submission without --requeue or --no-requeue
-- has requeue NO_VAL16.
local NO_VAL = 4294967294
local NO_VAL16 = 65534
local UNSET = {
    submit = { begin_time = 0, requeue = NO_VAL16, time_limit = NO_VAL },
    modify = { begin_time = 0, min_nodes = NO_VAL, max_nodes = NO_VAL, num_tasks = NO_VAL },
}

local function decode(command, fields)
    local desc, rec, exploding, extra = {}, {}, {}, {}
    for name, value in pairs(UNSET[command] or UNSET.submit) do desc[name] = value end
    for _, field in ipairs(fields) do
        local kind, name, value = field:match("^(%a+):([^=]+)=(.*)$")
        if kind == "s" then value = unhex(value)
        elseif kind == "n" then value = tonumber(value)
        elseif kind == "b" then value = (value == "1")
        end
        local target = desc
        if name:sub(1, 4) == "rec." then target, name = rec, name:sub(5) end
        if name:sub(1, 1) == "@" then target, name = extra, name:sub(2) end
        if kind == "x" then
            exploding[name], target[name] = true, nil
        else
            target[name] = value
        end
    end
    if next(exploding) then
        setmetatable(desc, { __index = function(_, key)
            if exploding[key] then error("simulated Slurm accessor failure for " .. key) end
        end })
    end
    return desc, rec, extra
end

local function encode(out, tbl, prefix)
    for name, value in pairs(tbl) do
        if type(value) == "string" then
            out[#out + 1] = "s:" .. prefix .. name .. "=" .. hex(value)
        elseif type(value) == "number" then
            out[#out + 1] = string.format("n:%s%s=%.17g", prefix, name, value)
        elseif type(value) == "boolean" then
            out[#out + 1] = "b:" .. prefix .. name .. "=" .. (value and "1" or "0")
        end
    end
end

local commands = {}

function commands.submit(desc, _, extra)
    fake_now = extra.now
    local result = slurm_job_submit(desc, {}, extra.uid or 1000)
    local out = { "n:@rc=" .. result }
    encode(out, desc, "")
    return out
end

function commands.modify(desc, rec, extra)
    local result = slurm_job_modify(desc, rec, {}, extra.uid or 1000)
    local out = { "n:@rc=" .. result }
    encode(out, desc, "")
    return out
end

function commands.set(desc)
    for name, value in pairs(desc) do
        if UNSET.submit[name] == nil then plugin.settings[name] = value end
    end
    return {}
end

-- Remove constants from the fake slurm table (a Slurm that exposes fewer of them).
function commands.unexpose(_, _, extra)
    for name in extra.names:gmatch("[%w_]+") do slurm[name] = nil end
    return {}
end

function commands.parse(_, _, extra)
    local ok, options = pcall(plugin.read_user_options, extra.comment)
    if not ok then
        return { "s:@result=" .. hex("error"), "s:@message=" .. hex(tostring(options.user_message or options)) }
    end
    if not options then return { "s:@result=" .. hex("none") } end
    options.deadline = extra.now and (extra.now + options.flex_s) or nil
    if not options.managed then options.deadline = nil end
    return { "s:@result=" .. hex("ok"), "s:@marker=" .. hex(plugin.format_marker(options)) }
end

function commands.strip(_, _, extra)
    return { "s:@text=" .. hex(plugin.strip_tokens(extra.text)) }
end

function commands.gpu(_, _, extra)
    return { "b:@gpu=" .. (plugin.asks_for_gpu(extra.tres) and "1" or "0") }
end

function commands.resolve()
    local out = {}
    for uid in pairs(plugin.resolve_privileged_uids()) do out[#out + 1] = "n:@uid" .. uid .. "=" .. uid end
    return out
end

function commands.bench(desc, _, extra)
    local template = {}
    for name, value in pairs(desc) do template[name] = value end
    local n = extra.iterations
    local started = os.clock()
    for _ = 1, n do
        local job = {}
        for name, value in pairs(template) do job[name] = value end
        slurm_job_submit(job, {}, 1000)
    end
    return { string.format("n:@seconds_per_job=%.17g", (os.clock() - started) / n) }
end

for line in io.lines() do
    local fields = {}
    for field in line:gmatch("[^\t]+") do fields[#fields + 1] = field end
    local command = table.remove(fields, 1)
    logs = {}
    local desc, rec, extra = decode(command, fields)
    local out = commands[command](desc, rec, extra)
    for _, entry in ipairs(logs) do out[#out + 1] = "log:" .. entry[1] .. "=" .. hex(entry[2]) end
    io.write(command, "\t", table.concat(out, "\t"), "\n")
    io.flush()
end
