package engine

// Lua scripts for share groups. Each runs on one segment stream and its
// share-partition hash, atomically, so that acquiring, claiming and
// acknowledging cannot interleave between members, and each is one round
// trip (several segments' scripts go out in one pipeline).
//
// The consumer group "share:{group}" on a segment stream is the share
// group's delivery state for that segment: its last-delivered-id is how
// far records were handed out, its PEL holds the records in flight, each
// owned by the member (consumer) that holds its acquisition lock, with the
// delivery count Kafka reports. A released record is claimed by the
// consumer "share:released" with a huge idle time, so that the next
// acquisition (which claims entries idle at least the lock duration) takes
// it at once.

// shareAcquireScript acquires up to n records for a member.
// KEYS[1] the stream, KEYS[2] the share-partition hash.
// ARGV group, consumer, lock ms, delivery count limit, n, the ID to create
// the group at if missing, max records in flight on this stream.
// Returns {entries, delivery counts, exhausted (0/1), pending, archived}.
const shareAcquireScript = `
local s, st, g, c = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local lock, limit, n, maxp = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[7])
local r = redis.pcall('XGROUP', 'CREATE', s, g, ARGV[6], 'MKSTREAM')
if type(r) == 'table' and r.err and not string.find(r.err, 'BUSYGROUP') then return r end
local ents, counts = {}, {}
local archived, redelivered = 0, 0
local claim, prev = {}, {}
for _, p in ipairs(redis.call('XPENDING', s, g, 'IDLE', lock, '-', '+', n)) do
  if tonumber(p[4]) >= limit then
    redis.call('XACK', s, g, p[1])
    archived = archived + 1
  else
    claim[#claim + 1] = p[1]
    prev[p[1]] = tonumber(p[4])
  end
end
if #claim > 0 then
  local seen = {}
  -- In chunks: unpack is bounded by Lua's C stack.
  for i = 1, #claim, 1000 do
    local chunk = {unpack(claim, i, math.min(i + 999, #claim))}
    for _, e in ipairs(redis.call('XCLAIM', s, g, c, lock, unpack(chunk))) do
      if e then
        ents[#ents + 1] = e
        counts[#counts + 1] = prev[e[1]] + 1
        seen[e[1]] = true
      end
    end
  end
  for _, id in ipairs(claim) do
    if not seen[id] then redis.call('XACK', s, g, id) end
  end
  redelivered = #ents
end
local pending = redis.call('XPENDING', s, g)[1]
local want = math.min(n - #ents, maxp - pending)
local exhausted = 0
if want > 0 then
  local got = 0
  local rd = redis.call('XREADGROUP', 'GROUP', g, c, 'COUNT', want, 'STREAMS', s, '>')
  if rd then
    for _, e in ipairs(rd[1][2]) do
      ents[#ents + 1] = e
      counts[#counts + 1] = 1
      got = got + 1
    end
  end
  if got < want then exhausted = 1 end
  pending = pending + got
end
if archived > 0 then redis.call('HINCRBY', st, 'archived_limit', archived) end
if #ents > 0 then redis.call('HINCRBY', st, 'deliveries', #ents) end
if redelivered > 0 then redis.call('HINCRBY', st, 'redeliveries', redelivered) end
return {ents, counts, exhausted, pending, archived}
`

// shareAckScript applies a member's acknowledgements to one stream. Every
// record in a non-gap run must be in flight, held by this member, with its
// lock not expired; otherwise nothing is applied and it returns -1.
// KEYS[1] the stream, KEYS[2] the share-partition hash.
// ARGV group, consumer, lock ms, delivery count limit, then first, last,
// type per run. Returns the number of records acknowledged.
const shareAckScript = `
local s, st, g, c = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local lock, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local acts = {}
for i = 5, #ARGV, 3 do
  local typ = tonumber(ARGV[i + 2])
  if typ ~= 0 then
    local ents = redis.call('XRANGE', s, ARGV[i], ARGV[i + 1])
    if #ents > 0 then
      local pend = redis.pcall('XPENDING', s, g, ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 1]) - tonumber(ARGV[i]) + 1)
      if pend.err then return -1 end
      local own = {}
      for _, p in ipairs(pend) do own[p[1]] = p end
      for _, e in ipairs(ents) do
        local p = own[e[1]]
        if not p or p[2] ~= c or tonumber(p[3]) >= lock then return -1 end
        acts[#acts + 1] = {e[1], typ, tonumber(p[4])}
      end
    end
  end
end
local n = {0, 0, 0, 0, 0}
for _, a in ipairs(acts) do
  local id, typ, cnt = a[1], a[2], a[3]
  if typ == 1 or typ == 3 then
    redis.call('XACK', s, g, id)
    n[typ] = n[typ] + 1
  elseif typ == 2 then
    if cnt >= limit then
      redis.call('XACK', s, g, id)
      n[5] = n[5] + 1
    else
      redis.call('XCLAIM', s, g, 'share:released', 0, id, 'IDLE', '1000000000000', 'RETRYCOUNT', cnt, 'JUSTID')
      n[2] = n[2] + 1
    end
  elseif typ == 4 then
    redis.call('XCLAIM', s, g, c, 0, id, 'RETRYCOUNT', cnt, 'JUSTID')
    n[4] = n[4] + 1
  end
end
local names = {'accepted', 'released', 'rejected', 'renewed', 'archived_limit'}
for i = 1, 5 do
  if n[i] > 0 then redis.call('HINCRBY', st, names[i], n[i]) end
end
return #acts
`

// shareReleaseScript releases every record a member holds on one stream
// (its share session closed). KEYS[1] the stream, KEYS[2] the
// share-partition hash. ARGV group, consumer, delivery count limit, max.
const shareReleaseScript = `
local s, st, g, c, limit = KEYS[1], KEYS[2], ARGV[1], ARGV[2], tonumber(ARGV[3])
local pend = redis.pcall('XPENDING', s, g, '-', '+', tonumber(ARGV[4]), c)
if pend.err then return 0 end
local rel, arch = 0, 0
for _, p in ipairs(pend) do
  if tonumber(p[4]) >= limit then
    redis.call('XACK', s, g, p[1])
    arch = arch + 1
  else
    redis.call('XCLAIM', s, g, 'share:released', 0, p[1], 'IDLE', '1000000000000', 'RETRYCOUNT', p[4], 'JUSTID')
    rel = rel + 1
  end
end
if rel > 0 then redis.call('HINCRBY', st, 'released', rel) end
if arch > 0 then redis.call('HINCRBY', st, 'archived_limit', arch) end
return rel + arch
`
