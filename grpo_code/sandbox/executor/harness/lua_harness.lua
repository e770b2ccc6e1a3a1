-- grpo-code's Lua harness (docs/languages.md): loads the program from the file named by
-- arg[1], then runs one script test (a test's os.exit(lu.LuaUnit.run()) ends it here) or
-- calls one function with the test's arguments and reports the result as data on fd 3.
-- The payload on fd 4: the nonce, then one JSON object. The expected value never enters
-- this process.
local open, write, format, exit, pcall, error = io.open, io.write, string.format, os.exit, pcall, error
local payload = open('/proc/self/fd/4', 'rb')
local text = payload and payload:read('a') or ''
if payload then payload:close() end
-- emptied before any program code runs: what opens fd 4 later finds no nonce
local emptied = open('/proc/self/fd/4', 'wb')
if emptied then emptied:close() end
local cut = text:find('\n', 1, true)
local nonce, rest = cut and text:sub(1, cut - 1) or text, cut and text:sub(cut + 1) or '{}'
local report_file = open('/proc/self/fd/3', 'wb')

local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' elseif c == '\\' then return '\\\\' end
    return format('\\u%04x', c:byte())
  end) .. '"'
end

local function report(event, extra)
  local line = '{"nonce":' .. quote(nonce) .. ', "event": ' .. quote(event)
  for k, v in pairs(extra or {}) do line = line .. ', ' .. quote(k) .. ': ' .. v end
  report_file:write(line .. '}\n')
  report_file:flush()
  exit(0, false)
end

local function message(s) return quote(tostring(s):sub(1, 4000)) end

-- JSON (NaN and Infinity included); objects decode to tables, the sandbox's tags to lists
local function decode(s)
  local i = 1
  local value
  local function ws() i = s:find('[^ \t\r\n]', i) or #s + 1 end
  local function str()
    local out, j = {}, i + 1
    while true do
      local c = s:sub(j, j)
      if c == '"' then i = j + 1; return table.concat(out) end
      if c == '\\' then
        local e = s:sub(j + 1, j + 1)
        if e == 'u' then
          local code = tonumber(s:sub(j + 2, j + 5), 16)
          if code >= 0xD800 and code < 0xDC00 and s:sub(j + 6, j + 7) == '\\u' then
            code = 0x10000 + (code - 0xD800) * 0x400 + (tonumber(s:sub(j + 8, j + 11), 16) - 0xDC00)
            j = j + 6
          end
          out[#out + 1] = utf8.char(code); j = j + 6
        else
          out[#out + 1] = ({n = '\n', t = '\t', r = '\r', b = '\b', f = '\f'})[e] or e; j = j + 2
        end
      else
        out[#out + 1] = c; j = j + 1
      end
    end
  end
  value = function()
    ws()
    local c = s:sub(i, i)
    if c == '{' then
      i = i + 1; local t, keys = {}, {}
      ws(); if s:sub(i, i) == '}' then i = i + 1; return t end
      while true do
        ws(); local k = str(); ws(); i = i + 1
        t[k] = value(); keys[#keys + 1] = k
        ws(); local d = s:sub(i, i); i = i + 1
        if d == '}' then break end
      end
      if #keys == 1 and (keys[1] == '$t' or keys[1] == '$s' or keys[1] == '$f') then return t[keys[1]] end
      if #keys == 1 and keys[1] == '$d' then
        local m = {}
        for _, pair in ipairs(t['$d']) do m[pair[1]] = pair[2] end
        return m
      end
      return t
    elseif c == '[' then
      i = i + 1; local t = {}
      ws(); if s:sub(i, i) == ']' then i = i + 1; return t end
      while true do
        t[#t + 1] = value()
        ws(); local d = s:sub(i, i); i = i + 1
        if d == ']' then return t end
      end
    elseif c == '"' then return str()
    elseif s:sub(i, i + 3) == 'null' then i = i + 4; return nil
    elseif s:sub(i, i + 3) == 'true' then i = i + 4; return true
    elseif s:sub(i, i + 4) == 'false' then i = i + 5; return false
    end
    local text = s:match('^[-+%d.eEINaInfinity]+', i)
    i = i + #text
    if text == 'NaN' then return 0 / 0 elseif text == 'Infinity' then return math.huge
    elseif text == '-Infinity' then return -math.huge end
    return math.tointeger(tonumber(text)) or tonumber(text)
  end
  return value()
end

local function encode(v)
  local t = type(v)
  if v == nil then return 'null' end
  if t == 'boolean' then return tostring(v) end
  if t == 'number' then
    if v ~= v then return 'NaN' elseif v == math.huge then return 'Infinity' elseif v == -math.huge then return '-Infinity' end
    if math.type(v) == 'integer' then return tostring(v) end
    return format('%.17g', v):find('[.eEn]') and format('%.17g', v) or format('%.17g', v) .. '.0'
  end
  if t == 'string' then return quote(v) end
  if t == 'table' then
    local n = #v
    local count = 0
    for _ in pairs(v) do count = count + 1 end
    if count == n then
      local parts = {}
      for k = 1, n do parts[k] = encode(v[k]) end
      return '[' .. table.concat(parts, ', ') .. ']'
    end
    local text, parts = true, {}
    for k in pairs(v) do if type(k) ~= 'string' then text = false end end
    for k, x in pairs(v) do
      parts[#parts + 1] = text and (quote(k) .. ': ' .. encode(x)) or ('[' .. encode(k) .. ', ' .. encode(x) .. ']')
    end
    return text and ('{' .. table.concat(parts, ', ') .. '}') or ('{"$d": [' .. table.concat(parts, ', ') .. ']}')
  end
  error({grpo_not_plain = 'the function returned a ' .. t .. ', which is not plain data'})
end

local what = decode(rest)
local EXITED = {}
os.exit = function(code) error({[EXITED] = code == nil or code == true or code == 0}) end

local function failed(err, event)
  if type(err) == 'table' and err[EXITED] ~= nil then
    if err[EXITED] and event == 'test' then report('completed') end
    report('assertion', {message = message('the process exited before the test completed')})
  end
  local text = type(err) == 'table' and (err.msg or err.message or tostring(err)) or tostring(err)
  if text:find('not enough memory') then report('memory') end
  report(event == 'test' and 'assertion' or 'runtime_error', {message = message(text)})
end

local program, problem = loadfile(arg[1], 't')
arg = {}  -- luaunit reads test names from the command line: the tests get none
if not program then report('compile_error', {message = message(problem)}) end
local ok, err = pcall(program)
if not ok then failed(err, 'load') end
if what.code then
  local test, bad = load(what.code, '=test.lua', 't')
  if not test then report('compile_error', {message = message(bad)}) end
  ok, err = pcall(test)
  if not ok then failed(err, 'test') end
  report('completed')
end
local fn = _G[what.fn]
if type(fn) ~= 'function' then report('runtime_error', {message = message('no function ' .. tostring(what.fn))}) end
local args = what.args or {}
local result = table.pack(pcall(fn, table.unpack(args, 1, #args)))
if not result[1] then failed(result[2], 'call') end
local value = result.n > 2 and {table.unpack(result, 2, result.n)} or result[2]
ok, err = pcall(encode, value)
if not ok then report('not_plain', {message = message(type(err) == 'table' and err.grpo_not_plain or err)}) end
report('returned', {value = err})
