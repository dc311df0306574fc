// korvet status page: polls the JSON API, renders it, and keeps the
// produce/consume rates of the last minutes for the charts. No framework,
// no build step. Everything shown is built with textContent: group names
// come from clients and must never be parsed as HTML.
"use strict";

(() => {
  const REFRESH_MS = 2000;
  const WINDOW_MS = 5 * 60 * 1000; // what the charts show
  const $ = (id) => document.getElementById(id);

  const { h, api } = window.korvet;

  const nf = new Intl.NumberFormat("en-US");
  const fmtInt = (n) => nf.format(Math.round(n));

  function fmtBytes(n) {
    if (n < 1024) return fmtInt(n) + " B";
    const units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    let u = -1;
    do { n /= 1024; u++; } while (n >= 1024 && u < units.length - 1);
    return (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)) + " " + units[u];
  }

  function fmtDuration(secs) {
    secs = Math.max(0, Math.floor(secs));
    const d = Math.floor(secs / 86400), hr = Math.floor(secs / 3600) % 24, m = Math.floor(secs / 60) % 60, s = secs % 60;
    if (d > 0) return d + "d " + hr + "h";
    if (hr > 0) return hr + "h " + m + "m";
    if (m > 0) return m + "m " + s + "s";
    return s + "s";
  }

  function fmtAgo(date) {
    const secs = (Date.now() - date.getTime()) / 1000;
    return secs < 5 ? "just now" : fmtDuration(secs) + " ago";
  }

  function fmtRetentionMs(v) {
    const ms = Number(v);
    if (!isFinite(ms) || ms < 0) return "forever";
    const units = [[86400000, "day"], [3600000, "hour"], [60000, "minute"], [1000, "second"]];
    for (const [size, name] of units) {
      if (ms >= size && ms % size === 0) {
        const n = ms / size;
        return n + " " + name + (n === 1 ? "" : "s");
      }
    }
    return fmtInt(ms) + " ms";
  }

  function fmtRate(perSec) {
    if (perSec >= 10000) return (perSec / 1000).toFixed(perSec >= 100000 ? 0 : 1) + "k";
    return perSec >= 10 ? fmtInt(perSec) : perSec.toFixed(1);
  }

  // fmtHot writes how long Redis holds a topic: "~N days in Redis".
  function fmtHot(secs) {
    const days = secs / 86400;
    if (days >= 1) return "~" + (days >= 10 ? Math.round(days) : days.toFixed(1)) + " days in Redis";
    const hours = secs / 3600;
    if (hours >= 1) return "~" + hours.toFixed(1) + " hours in Redis";
    return "~" + Math.max(1, Math.round(secs / 60)) + " minutes in Redis";
  }

  function pill(text, kind) {
    return h("span", { class: "pill " + (kind || "") }, text);
  }

  // kv fills a <dl> with [label, value] rows; a value may be a Node.
  function kv(dl, rows) {
    dl.replaceChildren(...rows.filter(Boolean).flatMap(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
  }

  // --- rates --------------------------------------------------------------

  const series = { produce: [], consume: [] };
  let last = null; // previous status sample

  // sample turns two status snapshots into records/s: produce from the sum
  // of high watermarks (every append counts, acks=0 too), consume from
  // the records korvet sent in fetch responses.
  function sample(st) {
    const now = { t: Date.parse(st.time), hw: st.totals.high_watermarks, fetched: st.broker.fetched_records_total, started: st.broker.started };
    if (last && now.started === last.started && now.t > last.t) {
      const dt = (now.t - last.t) / 1000;
      push(series.produce, { t: now.t, v: Math.max(0, now.hw - last.hw) / dt });
      push(series.consume, { t: now.t, v: Math.max(0, now.fetched - last.fetched) / dt });
    }
    last = now;
  }

  function push(arr, p) {
    arr.push(p);
    while (arr.length > 2 && arr[0].t < p.t - WINDOW_MS) arr.shift();
  }

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  // niceMax rounds up to 1, 2 or 5 times a power of ten, for a tidy axis.
  function niceMax(v) {
    if (v <= 1) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function drawChart(canvas, pts, color, fill) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth, ht = canvas.clientHeight;
    if (w === 0 || ht === 0) return;
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(ht * dpr);
    const g = canvas.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, ht);

    const top = 14, bottom = ht - 16, left = 0, right = w;
    const max = niceMax(Math.max(0, ...pts.map((p) => p.v)) * 1.1);
    const y = (v) => bottom - (v / max) * (bottom - top);
    // Until the window is full the samples spread over the whole width.
    const tEnd = pts.length ? pts[pts.length - 1].t : 0;
    const span = pts.length > 1 ? Math.min(WINDOW_MS, tEnd - pts[0].t) : WINDOW_MS;
    const x = (i) => right - ((tEnd - pts[i].t) / span) * (right - left);

    g.strokeStyle = cssVar("--line");
    g.lineWidth = 1;
    g.fillStyle = cssVar("--muted");
    g.font = "11px system-ui, sans-serif";
    g.textBaseline = "bottom";
    for (const f of [0, 0.5, 1]) {
      const yy = Math.round(y(max * f)) + 0.5;
      g.beginPath();
      g.moveTo(left, yy);
      g.lineTo(right, yy);
      g.stroke();
    }
    g.fillText(fmtRate(max) + "/s", left + 2, top - 1);
    g.textBaseline = "top";
    g.textAlign = "right";
    if (pts.length > 1 && span >= 1000) g.fillText("last " + fmtDuration(span / 1000), right - 2, bottom + 3);
    g.textAlign = "start";

    if (pts.length < 2) {
      g.textBaseline = "middle";
      g.textAlign = "center";
      g.fillText("collecting samples…", w / 2, (top + bottom) / 2);
      g.textAlign = "start";
      return;
    }
    g.beginPath();
    pts.forEach((p, i) => (i === 0 ? g.moveTo(x(i), y(p.v)) : g.lineTo(x(i), y(p.v))));
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.lineJoin = "round";
    g.stroke();
    g.lineTo(x(pts.length - 1), bottom);
    g.lineTo(x(0), bottom);
    g.closePath();
    g.fillStyle = fill;
    g.fill();
  }

  function renderRates(st) {
    const charts = [
      ["produce", series.produce, "--accent", "--accent-soft", fmtInt(st.totals.records) + " records in " + fmtInt(st.totals.partitions) + " partitions"],
      ["consume", series.consume, "--accent2", "--accent2-soft", fmtInt(st.broker.fetched_records_total) + " records fetched since start"],
    ];
    for (const [name, pts, color, fill, foot] of charts) {
      const cur = pts.length ? pts[pts.length - 1].v : 0;
      $(name + "-rate").replaceChildren(fmtRate(cur), h("small", null, " records/s"));
      $(name + "-foot").textContent = foot;
      drawChart($(name + "-chart"), pts, cssVar(color), cssVar(fill));
    }
  }

  // --- sections -----------------------------------------------------------

  function renderHeader(st) {
    $("version").textContent = st.broker.version;
    const overall = $("overall");
    if (!st.redis.reachable) {
      overall.className = "pill bad";
      overall.textContent = "Redis unreachable";
    } else if (st.warnings.length || st.memory_warning) {
      const n = st.warnings.length + (st.memory_warning ? 1 : 0);
      overall.className = "pill " + (st.memory_warning && st.memory_warning.level === "critical" ? "bad" : "warn");
      overall.textContent = n === 1 ? "1 warning" : n + " warnings";
    } else {
      overall.className = "pill ok";
      overall.textContent = "All good";
    }
    $("updated").textContent = "updated " + new Date(st.time).toLocaleTimeString();
    $("viewer").textContent = st.viewer ? st.viewer.principal.replace(/^User:/, "") : "";
    const ws = $("warnings");
    ws.replaceChildren(...st.warnings.map((w) => h("li", null, w)));
    ws.hidden = st.warnings.length === 0;
    // Redis filling up gets its own banner: at 100% every produce fails.
    const mb = $("memory-banner"), mw = st.memory_warning;
    mb.hidden = !mw;
    if (mw) {
      mb.className = "banner " + (mw.level === "critical" ? "error" : "warn");
      mb.dataset.level = mw.level;
      mb.textContent = "⚠ " + mw.message;
    }
  }

  function renderBroker(st) {
    const b = st.broker;
    kv($("broker-kv"), [
      ["Version", b.version],
      ["Uptime", fmtDuration(b.uptime_seconds)],
      ["Clients", h("span", { "data-field": "clients" }, fmtInt(b.clients_connected) + " connected")],
      ...b.listeners.map((l) => [l.name, h("span", { class: "mono" }, l.address)]),
      ["Requests", fmtInt(b.requests_total)],
      ["Traffic", fmtBytes(b.bytes_in_total) + " in · " + fmtBytes(b.bytes_out_total) + " out"],
      ["Keyspace", h("span", { class: "mono" }, b.keyspace)],
      ["Cluster", h("span", { class: "mono small" }, b.cluster_id)],
    ]);
  }

  function renderRedis(st) {
    const r = st.redis;
    if (!r.reachable) {
      kv($("redis-kv"), [["Status", pill("unreachable", "bad")], ["Error", r.error]]);
      return;
    }
    const mem = fmtBytes(r.used_memory) + (r.maxmemory > 0 ? " of " + fmtBytes(r.maxmemory) : " (no limit)");
    const persistence = h("span", null,
      r.aof_enabled ? pill("AOF on", r.aof_last_write_ok ? "ok" : "bad") : pill("AOF off", "warn"),
      " ",
      r.rdb_last_save_unix > 0 ? h("span", { class: "muted small" }, "RDB " + fmtAgo(new Date(r.rdb_last_save_unix * 1000))) : null);
    kv($("redis-kv"), [
      ["Status", pill("reachable", "ok")],
      ["Version", r.version + (r.mode ? " (" + r.mode + ")" : "")],
      // On a cluster INFO answers for one node: every node is under Redis shards.
      ["Memory", r.mode === "cluster" ? h("span", null, mem, h("span", { class: "muted small" }, " · one node; all under Redis shards")) : mem],
      ["Persistence", persistence],
      ["Eviction", r.maxmemory_policy === "noeviction" ? "noeviction" : pill(r.maxmemory_policy || "?", "warn")],
      ["Round trip", r.round_trip_ms.toFixed(2) + " ms"],
      ["Uptime", fmtDuration(r.uptime_seconds)],
    ]);
  }

  // memBar shows a node's used memory against its maxmemory, or against
  // its peak when it has no limit (then it is never a warning).
  function memBar(n) {
    const limit = n.maxmemory > 0 ? n.maxmemory : Math.max(n.used_memory_peak, n.used_memory, 1);
    const frac = Math.min(1, n.used_memory / limit);
    const kind = n.maxmemory > 0 ? (frac >= 0.9 ? "bad" : frac >= 0.75 ? "warn" : "") : "";
    const bar = h("span", { class: "membar " + kind, title: n.maxmemory > 0 ? Math.round(frac * 100) + "% of maxmemory" : "of the peak (no maxmemory)" }, h("span"));
    bar.firstChild.style.width = Math.max(1, Math.round(frac * 100)) + "%";
    return bar;
  }

  function nodeLine(n) {
    const kind = !n.up ? "bad" : n.health && n.health !== "online" ? "warn" : n.role === "master" ? "ok" : "";
    const mem = n.used_memory > 0
      ? h("span", { class: "mem", title: "used_memory; peak " + fmtBytes(n.used_memory_peak) }, memBar(n), " " + fmtBytes(n.used_memory) + (n.maxmemory > 0 ? " of " + fmtBytes(n.maxmemory) : " · peak " + fmtBytes(n.used_memory_peak)))
      : null;
    return h("div", { class: "node", "data-node-addr": n.addr, "data-role": n.role },
      pill(n.role + (n.health && n.health !== "online" ? " · " + n.health : ""), kind),
      h("span", { class: "mono addr", title: n.id || "" }, n.addr),
      !n.up ? h("span", { class: "pill bad", title: n.error || "" }, "unreachable" + (n.error ? ": " + n.error : "")) : null,
      mem,
      n.up && n.used_memory > 0 ? h("span", { class: "muted" }, fmtInt(n.keys) + " keys") : null);
  }

  // renderRedisShards shows the Redis deployment: one row per shard (a
  // standalone Redis is one shard serving every slot).
  function renderRedisShards(rd) {
    const shards = rd.shards || [];
    $("redis-shards-count").textContent = shards.length;
    $("redis-mode").textContent = rd.cluster ? "Redis Cluster" : "standalone";
    const body = $("redis-shards-body");
    if (rd.error || shards.length === 0) {
      body.replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 4 }, rd.error ? "Shard map unavailable: " + rd.error : "No shards.")));
    } else {
      body.replaceChildren(...shards.map((s) => h("tr", { "data-shard": s.master },
        h("td", { class: "name" }, h("span", { class: "mono" }, s.master), s.id ? h("div", { class: "muted small mono", title: s.id }, s.id.slice(0, 12)) : null),
        h("td", { class: "num", "data-field": "slots" }, fmtInt(s.slots), h("div", { class: "muted small" }, s.slot_ranges)),
        h("td", { class: "num", "data-field": "partitions" }, fmtInt(s.partitions)),
        h("td", null, h("div", { class: "nodes" }, s.nodes.map(nodeLine))))));
    }
    const r = rd.redirects;
    $("redis-foot").textContent = fmtInt(rd.partitions) + " partitions" +
      (rd.unserved_partitions > 0 ? " (" + fmtInt(rd.unserved_partitions) + " on slots no shard serves)" : "") +
      " · redirects: " + fmtInt(r.moved) + " moved, " + fmtInt(r.ask) + " ask, " + fmtInt(r.tryagain) + " tryagain, " + fmtInt(r.clusterdown) + " clusterdown" +
      " · slot map reloads: " + fmtInt(rd.slot_map_refreshes) +
      (rd.at ? " · read " + fmtAgo(new Date(rd.at)) : "");
  }

  function partLines(items, fn, limit) {
    const shown = items.slice(0, limit);
    const lines = shown.map(fn);
    if (items.length > limit) lines.push(h("span", { class: "muted" }, "+" + (items.length - limit) + " more"));
    return h("div", { class: "parts" }, lines);
  }

  function renderTopics(topics) {
    $("topics-count").textContent = topics.length;
    const body = $("topics-body");
    if (topics.length === 0) {
      body.replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 9 }, "No topics yet. Produce to one and it appears here.")));
      return;
    }
    body.replaceChildren(...topics.map((t) => {
      const c = t.configs;
      const retBytes = Number(c["retention.bytes"].value);
      const retention = fmtRetentionMs(c["retention.ms"].value) + (retBytes >= 0 ? " or " + fmtBytes(retBytes) : "");
      return h("tr", { "data-topic": t.name },
        h("td", { class: "name" }, h("a", { href: "#topic=" + encodeURIComponent(t.name), title: "open the topic" }, t.name)),
        h("td", { class: "num" }, t.partitions.length),
        h("td", null, partLines(t.partitions, (p) => h("span", null, h("b", null, "p" + p.partition), fmtInt(p.log_start) + " → " + fmtInt(p.high_watermark)), 8)),
        h("td", { class: "num" }, fmtInt(t.records)),
        h("td", { class: "num", title: "appended over the topic's life" }, fmtBytes(t.bytes)),
        redisCell(t),
        hotCell(t),
        h("td", null, retention),
        h("td", null, c["cleanup.policy"].value));
    }));
  }

  // redisCell shows what a topic takes in Redis per record, next to the
  // records' own size, from the last memory sample.
  function redisCell(t) {
    if (t.redis_bytes_per_record == null) {
      return h("td", { class: "num muted", "data-field": "redis-per-record", title: "not sampled yet (redis.memory_sample_interval)" }, "—");
    }
    const per = t.redis_bytes_per_record, rec = t.record_bytes_per_record;
    return h("td", { class: "num", "data-field": "redis-per-record", title: fmtBytes(t.redis_bytes) + " in Redis; sampled " + fmtAgo(new Date(t.redis_sampled_at)) },
      fmtInt(Math.round(per)) + " B/record",
      rec > 0 ? h("div", { class: "muted small" }, (per / rec).toFixed(2) + "× the record · " + fmtBytes(t.redis_bytes)) : null);
  }

  // hotCell projects how much time of the topic Redis holds at this rate.
  function hotCell(t) {
    if (t.hot_retention_seconds == null) {
      const why = t.redis_bytes == null ? "not sampled yet" : "not growing, and no retention or memory limit bounds it";
      return h("td", { class: "muted", "data-field": "hot-retention", title: why }, "—");
    }
    return h("td", { "data-field": "hot-retention", title: "Redis holds ~" + fmtDuration(t.hot_retention_seconds) + " of " + t.name + " at this rate (holds " + fmtDuration(t.hot_span_seconds || 0) + " now)" },
      fmtHot(t.hot_retention_seconds));
  }

  // renderBrokers shows every live broker on this Redis; "this one" is
  // the broker serving the page.
  function renderBrokers(bl) {
    const brokers = bl.brokers;
    $("brokers-count").textContent = brokers.length;
    const body = $("brokers-body");
    if (brokers.length === 0) {
      body.replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 7 }, "No live broker registered yet.")));
      return;
    }
    body.replaceChildren(...brokers.map((b) => h("tr", { "data-node": b.node_id },
      h("td", { class: "name" }, String(b.node_id), b.self ? h("span", { class: "muted" }, " this one") : null),
      h("td", null, h("div", { class: "parts" }, b.listeners.map((l) => h("span", null, h("b", null, l.name), " " + l.host + ":" + l.port)))),
      h("td", null, b.rack || "—"),
      h("td", { class: "num", "data-field": "lease-age" }, b.lease_age_seconds.toFixed(1) + " s"),
      h("td", { title: b.started }, fmtAgo(new Date(b.started))),
      h("td", { class: "num", "data-field": "led" }, fmtInt(b.partitions_led)),
      h("td", { class: "num", "data-field": "coordinated", title: bl.error || "" }, b.groups_coordinated === undefined ? "?" : fmtInt(b.groups_coordinated)))));
  }

  const stateKind = { Stable: "ok", Empty: "", Dead: "bad", PreparingRebalance: "warn", CompletingRebalance: "warn", Assigning: "warn", Reconciling: "warn" };

  // memberLines shows a consumer group's (KIP-848) members: client, epoch,
  // protocol and the partitions each owns.
  function memberLines(g) {
    if (!g.member_list || g.member_list.length === 0) return null;
    return h("div", { class: "members" }, ...g.member_list.map((m) => h("div", null,
      h("b", null, m.client_id || m.member_id), " ",
      h("span", { class: "muted" }, "epoch " + m.epoch + (m.protocol === "classic" ? " · classic" : "") + (m.state !== "stable" ? " · " + m.state.replace("_", " ") : "")), " ",
      m.assignment.map((a) => a.topic + "[" + a.partitions.join(",") + "]").join(" ") || "—")));
  }

  function renderGroups(groups) {
    $("groups-count").textContent = groups.length;
    const body = $("groups-body");
    if (groups.length === 0) {
      body.replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 5 }, "No consumer groups have committed offsets yet.")));
      return;
    }
    const maxLag = Math.max(1, ...groups.flatMap((g) => g.partitions.map((p) => p.lag)));
    body.replaceChildren(...groups.map((g) => h("tr", { "data-group": g.group },
      h("td", { class: "name" }, h("a", { href: "#group=" + encodeURIComponent(g.group), title: "open the group" }, g.group), g.type === "consumer" ? h("span", { class: "muted" }, " consumer · epoch " + g.group_epoch + " · " + g.assignor) : null),
      h("td", null, pill(g.state, stateKind[g.state])),
      h("td", { class: "num" }, g.members),
      h("td", { class: "num", "data-field": "lag" }, fmtInt(g.lag)),
      h("td", null, g.error ? h("span", { class: "muted" }, g.error) : partLines(g.partitions, (p) => h("span", null,
        h("b", null, p.topic + "/" + p.partition), " ", fmtInt(p.committed) + " / " + fmtInt(p.high_watermark),
        p.lag > 0 ? lagBar(p.lag, maxLag) : null), 10), memberLines(g)))));
  }

  function renderShareGroups(groups) {
    $("share-groups-count").textContent = groups.length;
    const body = $("share-groups-body");
    if (groups.length === 0) {
      body.replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 5 }, "No share groups.")));
      return;
    }
    body.replaceChildren(...groups.map((g) => h("tr", { "data-share-group": g.group },
      h("td", { class: "name", title: "Redis consumer group share:" + g.group }, g.group),
      h("td", null, pill(g.state, stateKind[g.state])),
      h("td", { class: "num", title: g.members.map((m) => m.client_id + " " + m.client_host).join("\n") }, g.members.length),
      h("td", { class: "num", "data-field": "in-flight" }, fmtInt(g.in_flight)),
      h("td", null, g.error ? h("span", { class: "muted" }, g.error) : partLines(g.partitions, (p) => h("span", null,
        h("b", null, p.topic + "/" + p.partition), " ", fmtInt(p.start_offset) + " / " + fmtInt(p.high_watermark),
        " · " + fmtInt(p.in_flight) + " in flight · " + fmtInt(p.deliveries) + ", " + fmtInt(p.redeliveries) + ", " + fmtInt(p.archived_by_limit)), 10)))));
  }

  function renderSchemas(subjects) {
    $("schemas-count").textContent = subjects.error ? "" : subjects.length;
    const body = $("schemas-body");
    if (subjects.error || subjects.length === 0) {
      body.replaceChildren(h("tr", null, h("td", { class: "empty", colSpan: 6 }, subjects.error || "No subjects.")));
      return;
    }
    body.replaceChildren(...subjects.map((s) => h("tr", { "data-subject": s.subject },
      h("td", { class: "name" }, s.subject),
      h("td", { "data-field": "versions" }, s.versions.join(", ")),
      h("td", { class: "num", "data-field": "latest-id" }, s.latest_id),
      h("td", { "data-field": "type" }, s.schema_type || "AVRO"),
      h("td", { "data-field": "compatibility", title: s.compatibility_own ? "set on this subject" : "the global level" }, s.compatibility + (s.compatibility_own ? " *" : "")),
      h("td", { "data-field": "mode" }, s.mode === "READWRITE" ? s.mode : pill(s.mode, "warn")))));
  }

  // lagBar is scaled to the largest lag on the page.
  function lagBar(lag, maxLag) {
    const bar = h("span", { class: "lagbar", title: "lag " + fmtInt(lag) });
    bar.style.width = Math.max(2, Math.round(80 * lag / maxLag)) + "px";
    return bar;
  }

  function renderIndex(st) {
    const ix = st.index;
    if (!ix) {
      kv($("index-kv"), [["Status", h("span", { class: "muted" }, "not enabled in this korvet")]]);
      return;
    }
    kv($("index-kv"), [
      ["Status", ix.rebuilding ? pill("rebuilding", "warn") : ix.open ? pill("open", "ok") : pill("closed", "bad")],
      ["Keys", fmtInt(ix.keys)],
      ["Size", fmtBytes(ix.size_bytes)],
      ["Lag", fmtInt(ix.lag) + " records"],
      ix.topics && ix.topics.length ? ["Topics", ix.topics.join(", ")] : null,
      ["Last rebuild", ix.last_rebuild ? fmtAgo(new Date(ix.last_rebuild)) : "never"],
      ix.error ? ["Error", h("span", { class: "pill bad" }, ix.error)] : null,
    ]);
  }

  function renderTiering(st) {
    const t = st.tiering;
    $("tiering").hidden = !t;
    if (!t) return;
    const la = t.last_archived;
    kv($("tiering-kv"), [
      ["Backlog", fmtInt(t.backlog_segments) + " segments · " + fmtBytes(t.backlog_bytes)],
      ["Last archived", la ? la.topic + "/" + la.partition + " segment " + la.segment + ", " + fmtAgo(new Date(la.at)) : "none yet"],
      ["Errors", fmtInt(t.errors)],
      t.last_error ? ["Last error", t.last_error + (t.last_error_at ? " (" + fmtAgo(new Date(t.last_error_at)) + ")" : "")] : null,
    ]);
  }

  // --- loop ---------------------------------------------------------------

  const getJSON = (path) => api("GET", path);

  let lastStatus = null;
  let timer = 0;

  async function refresh() {
    clearTimeout(timer);
    try {
      // The Redis deployment is optional: a korvet whose shard map cannot
      // be read still shows everything else.
      const redis = getJSON("/api/v1/redis").catch((e) => ({ error: e.message, shards: [], partitions: 0, unserved_partitions: 0, redirects: { moved: 0, ask: 0, tryagain: 0, clusterdown: 0 }, slot_map_refreshes: 0 }));
      // Likewise the schema registry.
      const schemas = getJSON("/api/v1/schemas").catch((e) => ({ error: e.message }));
      const [st, brokers, topics, groups, shareGroups, rd, subjects] = await Promise.all([getJSON("/api/v1/status"), getJSON("/api/v1/brokers"), getJSON("/api/v1/topics"), getJSON("/api/v1/groups"), getJSON("/api/v1/share-groups"), redis, schemas]);
      sample(st);
      lastStatus = st;
      renderHeader(st);
      renderBroker(st);
      renderRedis(st);
      renderRates(st);
      renderRedisShards(rd);
      renderBrokers(brokers);
      renderTopics(topics);
      renderGroups(groups);
      renderShareGroups(shareGroups);
      renderSchemas(subjects);
      renderIndex(st);
      renderTiering(st);
      $("offline").hidden = true;
      document.body.dataset.state = "ready";
      document.dispatchEvent(new CustomEvent("korvet:status", { detail: { status: st, topics, groups } }));
    } catch (e) {
      if (e.status === 401) {
        // Not logged in (or the login went stale): the form, not an outage.
        $("offline").hidden = true;
        $("overall").className = "pill";
        $("overall").textContent = "log in";
        document.body.dataset.state = "login";
        document.dispatchEvent(new CustomEvent("korvet:unauthorized", { detail: { message: e.message } }));
        return; // polling resumes after the login
      }
      const off = $("offline");
      off.querySelector("span").textContent = e.message;
      off.hidden = false;
      $("overall").className = "pill bad";
      $("overall").textContent = "offline";
      document.body.dataset.state = "error";
    }
    // Hidden tabs stop polling; visibilitychange resumes.
    if (!document.hidden) timer = setTimeout(refresh, REFRESH_MS);
  }

  // A login or logout from the admin views: show what the new principal sees.
  document.addEventListener("korvet:refresh", () => refresh());
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) refresh();
  });
  window.addEventListener("resize", () => {
    if (lastStatus) renderRates(lastStatus);
  });
  refresh();
})();
