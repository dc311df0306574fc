// korvet page kit: what the status view (app.js) and the admin views
// (admin.js) share — element building, the API client with the tab's
// login, and the notice line. Loaded first; it only defines things.
"use strict";

window.korvet = (() => {
  const LOGIN_KEY = "korvet.login"; // base64 of "user:password", this tab only
  const USER_KEY = "korvet.user";

  // h builds an element: h("td", {class: "num"}, "42", h("b", null, "x")).
  // Text always goes in as text nodes: names and values come from clients
  // and must never be parsed as HTML.
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") el.className = v;
      else if (k.startsWith("data-") || k.startsWith("aria-")) el.setAttribute(k, v);
      else if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else el[k] = v;
    }
    for (const kid of kids.flat()) {
      if (kid === undefined || kid === null || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }

  // svg builds an SVG element; attributes only, no markup.
  function svg(tag, attrs, ...kids) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    return el;
  }

  const nf = new Intl.NumberFormat("en-US");
  const fmtInt = (n) => nf.format(Math.round(n));

  // --- login ---------------------------------------------------------------

  function utf8Base64(s) {
    let bin = "";
    for (const b of new TextEncoder().encode(s)) bin += String.fromCharCode(b);
    return btoa(bin);
  }

  const login = {
    get: () => sessionStorage.getItem(LOGIN_KEY),
    user: () => sessionStorage.getItem(USER_KEY) || "",
    set(user, password) {
      sessionStorage.setItem(LOGIN_KEY, utf8Base64(user + ":" + password));
      sessionStorage.setItem(USER_KEY, user);
    },
    clear() {
      sessionStorage.removeItem(LOGIN_KEY);
      sessionStorage.removeItem(USER_KEY);
    },
  };

  // ApiError carries the HTTP status and korvet's error code; its message
  // is the API's "message", meant for the user.
  class ApiError extends Error {
    constructor(message, status, code) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // api calls korvet's JSON API. With a login from the page's form it is
  // sent as Basic on every call and the browser's own (cached) login is
  // left out, so a wrong password shows the form's message rather than
  // the browser's prompt. Without one the browser's cached login, if any,
  // goes along as before. From the origin, not the page's URL: a page
  // opened as user:pass@host carries that in every relative URL, which
  // fetch refuses.
  async function api(method, path, body) {
    const opts = { method, cache: "no-store", headers: {}, credentials: "same-origin" };
    const cred = login.get();
    if (cred) {
      opts.headers.Authorization = "Basic " + cred;
      opts.credentials = "omit";
    }
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    let r;
    try {
      r = await fetch(new URL(path, location.origin), opts);
    } catch (e) {
      throw new ApiError("korvet does not answer (" + e.message + ")", 0, "unreachable");
    }
    const text = await r.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!r.ok) {
      const msg = data && (data.message || data.error);
      throw new ApiError(msg ? String(msg) : path + " answered HTTP " + r.status, r.status, data && data.error);
    }
    return data;
  }

  // --- notice --------------------------------------------------------------

  let noticeTimer = 0;

  // notice shows one line at the top: what an action did or why it failed.
  // Errors stay until the next notice; successes fade after a while.
  function notice(text, kind) {
    const el = document.getElementById("notice");
    clearTimeout(noticeTimer);
    el.className = "banner " + (kind === "error" ? "error" : "ok");
    el.dataset.kind = kind || "ok";
    el.textContent = text;
    el.hidden = false;
    if (kind !== "error") noticeTimer = setTimeout(() => { el.hidden = true; }, 8000);
  }

  // --- bytes ---------------------------------------------------------------

  function base64Bytes(b64) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function hex(bytes) {
    const parts = [];
    for (const b of bytes) parts.push(b.toString(16).padStart(2, "0"));
    return parts.join(" ");
  }

  // --- confirmations -------------------------------------------------------

  // confirmInline swaps the children of box for a question with Confirm
  // and Cancel; run is awaited on Confirm. In the page, not a modal
  // window.confirm: it works the same on a phone and in a test browser.
  function confirmInline(box, question, run) {
    const before = [...box.childNodes];
    const restore = () => box.replaceChildren(...before);
    const yes = h("button", { type: "button", class: "danger", "data-action": "confirm" }, "Confirm");
    const no = h("button", { type: "button", "data-action": "cancel", on: { click: restore } }, "Cancel");
    yes.addEventListener("click", async () => {
      yes.disabled = no.disabled = true;
      try {
        await run();
      } finally {
        restore();
      }
    });
    box.replaceChildren(h("span", { class: "question" }, question), yes, no);
    yes.focus();
  }

  // lines parses "key=value" lines (blank lines skipped) into pairs.
  function lines(text) {
    const out = [];
    for (const raw of text.split("\n")) {
      const line = raw.trim();
      if (!line) continue;
      const at = line.indexOf("=");
      if (at <= 0) throw new Error("\"" + line + "\" is not key=value");
      out.push([line.slice(0, at).trim(), line.slice(at + 1).trim()]);
    }
    return out;
  }

  // busy disables a form's buttons while an action runs, and reports its
  // failure as a notice: the API's message says what to fix.
  async function busy(form, run) {
    const buttons = [...form.querySelectorAll("button")];
    for (const b of buttons) b.disabled = true;
    try {
      await run();
    } catch (e) {
      notice(e.message, "error");
    } finally {
      for (const b of buttons) b.disabled = false;
    }
  }

  // --- sparkline -------------------------------------------------------------

  // sparkline draws [{time, lag}] (two or more) as inline SVG: a line over
  // its area, the latest value marked, scaled to the box; no canvas
  // redraw on resize.
  function sparkline(points) {
    const W = 300, H = 60, pad = 3;
    const ts = points.map((p) => new Date(p.time).getTime()), lags = points.map((p) => Math.max(0, p.lag));
    const t0 = ts[0], span = Math.max(1, ts[ts.length - 1] - t0), max = Math.max(1, ...lags);
    const xy = points.map((_, i) => [pad + ((ts[i] - t0) / span) * (W - 2 * pad), H - pad - (lags[i] / max) * (H - 2 * pad)]);
    const line = xy.map(([x, y]) => x.toFixed(1) + "," + y.toFixed(1)).join(" ");
    const [lx, ly] = xy[xy.length - 1];
    const mins = Math.round(span / 60000);
    return h("div", { class: "sparkline" },
      svg("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", role: "img", "aria-label": "lag over the last " + mins + " minutes, up to " + max },
        svg("polygon", { class: "area", points: pad + "," + (H - pad) + " " + line + " " + lx.toFixed(1) + "," + (H - pad) }),
        svg("polyline", { class: "line", points: line }),
        svg("circle", { class: "dot", cx: lx.toFixed(1), cy: ly.toFixed(1), r: 2.5 })),
      h("div", { class: "muted small spark-foot" }, "max " + fmtInt(max) + " · last " + (mins >= 1 ? mins + " min" : "minute")));
  }

  return { h, svg, fmtInt, sparkline, login, api, ApiError, notice, base64Bytes, hex, confirmInline, lines, busy };
})();
