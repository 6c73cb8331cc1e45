// The user's portal: the resources and sessions of the signed-in user (the launch API, with
// the portal's session cookie and CSRF token), a launch's steps as they happen, and the
// desktop in the page (noVNC over a resumable WebSocket channel: channel.js).

import RFB from "./novnc/core/rfb.js";
import { ResumableChannel } from "./channel.js";

const csrf = document.body.dataset.csrf;
const $ = (id) => document.getElementById(id);

// endpoint names this browser to the broker: a launch from the same endpoint reconnects its
// session rather than taking it from another device.
function endpoint() {
    let e = localStorage.getItem("frontdoor.endpoint");
    if (!e) {
        const b = crypto.getRandomValues(new Uint8Array(8));
        e = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join(""); // the server adds "browser:"
        localStorage.setItem("frontdoor.endpoint", e);
    }
    return e;
}

class APIError extends Error {
    constructor(status, message) {
        super(message);
        this.status = status;
    }
}

async function api(method, path, body) {
    const headers = { "X-CSRF-Token": csrf };
    if (body !== undefined) {
        headers["Content-Type"] = "application/json";
    }
    const r = await fetch(path, { method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body) });
    let j = null;
    try { j = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) {
        throw new APIError(r.status, (j && (j.reason || j.error)) || r.statusText);
    }
    return j;
}

// inWords says what went wrong in a user's words.
function inWords(err) {
    if (!(err instanceof APIError)) {
        return err.message;
    }
    switch (err.status) {
    case 401: return "Your sign-in has ended: sign in again.";
    case 403: return "You may not open this now: " + err.message + ".";
    case 429: return "Too many tries: wait a minute and try again.";
    case 503: return "The site cannot open it now (" + err.message + "): try again in a minute.";
    }
    return err.message;
}

function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
        if (k === "class") e.className = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k);
    return e;
}

// openIn is where this user opens resources: "browser" or "native", remembered in this
// browser for each user.
const openInKey = "frontdoor.open-in." + document.body.dataset.user;

function openIn() {
    return localStorage.getItem(openInKey) === "native" ? "native" : "browser";
}

function inBrowser(r) {
    if (openIn() === "native") return "";
    if (r.mode === "direct") return "reached directly, not through a gateway: the browser cannot carry it";
    if (r.protocol === "rdp") return "an RDP desktop: the browser shows VNC desktops only";
    return "";
}

async function loadResources() {
    const list = $("resources"), state = $("resources-state");
    let rs;
    try {
        rs = await api("GET", "/v1/resources");
    } catch (e) {
        state.textContent = inWords(e);
        if (e.status === 401) location.reload();
        return;
    }
    list.replaceChildren();
    state.textContent = rs.length === 0 ? "You have no desktops or apps here." : "";
    for (const r of rs) {
        const why = r.denied ? el("span", { class: "state denied" }, "Not available: " + r.denied) : el("span", { class: "where" }, r.why);
        const no = inBrowser(r);
        const open = el("button", { type: "button", "data-resource": r.name, onclick: () => (openIn() === "native" ? launchFile(r.name) : launch(r.name)) }, r.session ? "Reconnect" : "Open");
        if (r.denied || no) {
            open.disabled = true;
            if (no) open.title = no;
        }
        list.append(el("li", { "data-resource": r.name },
            el("span", { class: "name" }, r.name), el("span", { class: "where" }, r.kind), why,
            no && !r.denied ? el("span", { class: "hint" }, no) : "",
            el("div", { class: "actions" }, open)));
    }
}

async function loadSessions() {
    const list = $("sessions"), state = $("sessions-state");
    let ss;
    try {
        ss = await api("GET", "/v1/sessions");
    } catch (e) {
        state.textContent = inWords(e);
        return;
    }
    list.replaceChildren();
    state.textContent = ss.length === 0 ? "You have no sessions." : "";
    for (const s of ss) {
        const logoff = el("button", { type: "button", class: "secondary", onclick: async () => {
            logoff.disabled = true;
            try {
                await api("POST", "/v1/sessions/" + encodeURIComponent(s.id) + "/logoff");
            } catch (e) {
                state.textContent = inWords(e);
            }
            refresh();
        } }, "Log off");
        list.append(el("li", { "data-session": s.id },
            el("span", { class: "name" }, s.resource),
            el("span", { class: "state " + s.state }, s.state),
            el("span", { class: "where" }, "on " + s.machine + " in zone " + s.zone + " (" + s.mode + "), since " + new Date(s.created).toLocaleTimeString()),
            el("div", { class: "actions" },
                el("button", { type: "button", onclick: () => (openIn() === "native" ? launchFile(s.resource) : launch(s.resource)) }, "Reconnect"), logoff)));
    }
}

function refresh() {
    loadResources();
    loadSessions();
}

function show(id) {
    for (const s of ["home", "launch", "desktop"]) {
        $(s).hidden = s !== id;
    }
}

// step adds a launch step with the milliseconds since t0.
function step(t0, text) {
    const li = el("li", { class: "done" }, text, el("span", { class: "ms" }, Math.round(performance.now() - t0) + " ms"));
    $("steps").append(li);
    return li;
}

function failed(text) {
    const e = $("launch-error");
    e.textContent = text;
    e.hidden = false;
    $("steps").append(el("li", { class: "failed" }, "Stopped"));
}

let rfb = null;

async function launch(resource) {
    const t0 = performance.now();
    show("launch");
    $("launch-name").textContent = resource;
    $("steps").replaceChildren();
    $("launch-error").hidden = true;
    step(t0, "Signed in as " + document.body.dataset.user);
    let d;
    try {
        d = await api("POST", "/v1/launch", { resource, endpoint: endpoint() });
    } catch (e) {
        failed(inWords(e));
        return;
    }
    step(t0, "Zone chosen: " + d.zone + (d.why ? " — " + d.why : ""));
    step(t0, "Machine chosen: " + d.machine + (d.outcome === "reconnect" ? " (your session there)" : " (a new session)"));
    step(t0, "Ticket issued for session " + d.session_id);
    if (d.mode !== "gateway" || !d.desktop || d.desktop.protocol === "rdp") {
        failed(d.mode !== "gateway" ? "This desktop is reached directly, not through a gateway: the browser cannot carry it. Open it with `frontdoor connect`." :
            "This desktop has no VNC display the browser can show.");
        return;
    }
    const port = d.desktop.channel.port;
    const gateways = (d.gateways || []).filter((g) => g.https_port && g.addresses && g.addresses.length).map((g) => {
        const a = g.addresses[0].includes(":") ? "[" + g.addresses[0] + "]" : g.addresses[0];
        return { name: g.name, url: "wss://" + a + ":" + g.https_port + "/v1/channel?port=" + port };
    });
    if (gateways.length === 0) {
        failed("No gateway of the site takes browsers now: try again in a minute.");
        return;
    }
    openDesktop(d, gateways, t0, resource);
}

// launchFile downloads a launch file for resource, which `frontdoor connect --file` opens
// once within a minute, and says how.
async function launchFile(resource) {
    show("launch");
    $("launch-name").textContent = resource + " in a native viewer";
    $("steps").replaceChildren();
    $("launch-error").hidden = true;
    const t0 = performance.now();
    let doc;
    try {
        doc = await api("POST", "/v1/launch-file", { resource });
    } catch (e) {
        failed(inWords(e));
        return;
    }
    const name = resource + ".fdlaunch";
    const a = el("a", { href: URL.createObjectURL(new Blob([JSON.stringify(doc, null, 2)], { type: "application/x-frontdoor-launch" })), download: name });
    document.body.append(a);
    a.click();
    a.remove();
    step(t0, "Launch file " + name + " downloaded: it opens once, until " + new Date(doc.expires).toLocaleTimeString());
    $("steps").append(el("li", {}, "Open it with ", el("code", {}, "frontdoor connect --file " + name + " --open"),
        " (with ", el("code", {}, "--ca FILE"), " where this computer does not trust the site's certificates)"));
}

window.frontdoorEvents = [];

function openDesktop(d, gateways, t0, resource) {
    const state = $("desk-state"), overlay = $("overlay");
    let frames = 0, firstFrame = false, via = "", opened = false;
    const ch = new ResumableChannel({
        gateways,
        ticket: d.reconnect_ticket,
        reliabilityMs: (d.desktop.reliability_timeout_seconds || 180) * 1000,
        onEvent: (kind, detail) => {
            // What the channel went through, for the drills and for support: each event's
            // kind, time (ms since the epoch), gateway and error.
            window.frontdoorEvents.push({ kind, at: Date.now(), gateway: detail.gateway || "", error: detail.error ? detail.error.message : "" });
            window.frontdoorEvents.splice(0, window.frontdoorEvents.length - 200); // the last 200: a page may stay open for days
            switch (kind) {
            case "open":
                via = detail.gateway;
                opened = true;
                step(t0, "Channel open through " + via);
                break;
            case "break":
                state.textContent = "Reconnecting: " + detail.error.message;
                state.className = "resuming";
                break;
            case "resumed":
                via = detail.gateway;
                state.textContent = "Connected through " + via + " (back in " + Math.round(detail.ms) + " ms)";
                state.className = "";
                document.body.dataset.resumed = String(Number(document.body.dataset.resumed || 0) + 1);
                break;
            case "end":
                if (detail.error) {
                    if (!opened) {
                        failed(detail.error.message);
                    } else {
                        state.textContent = "Disconnected: " + detail.error.message;
                        state.className = "resuming";
                    }
                }
                break;
            }
        },
    });
    const screen = $("screen");
    screen.replaceChildren();
    rfb = new RFB(screen, ch, { shared: true });
    rfb.scaleViewport = true;
    rfb.resizeSession = true;
    rfb.focusOnClick = true;
    // noVNC 1.7.0 (vendored) finishes every framebuffer update with its display's flip:
    // frames are counted there, for the overlay and the launch's last step.
    const flip = rfb._display.flip.bind(rfb._display);
    rfb._display.flip = (...args) => {
        frames++;
        if (!firstFrame) {
            firstFrame = true;
            step(t0, "First frame");
            $("desk-name").textContent = resource + " — session " + d.session_id;
            state.textContent = "Connected through " + via;
            document.body.dataset.session = d.session_id;
            show("desktop");
            rfb.focus();
        }
        return flip(...args);
    };
    let last = performance.now(), lastFrames = 0;
    const tick = setInterval(() => {
        const now = performance.now();
        const fps = (frames - lastFrames) * 1000 / (now - last);
        last = now;
        lastFrames = frames;
        const rtt = ch.rtt ? ch.rtt.toFixed(1) + " ms round trip · " : "";
        overlay.textContent = rtt + fps.toFixed(0) + " fps · " + (ch._ws ? "via " + via : "no channel");
    }, 1000);
    // The desktop's clipboard goes to this computer's, and the bar says so (a browser may
    // not let a page write it).
    rfb.addEventListener("clipboard", (e) => {
        const text = e.detail.text;
        const said = (ok) => {
            const shown = "\u201c" + text.slice(0, 40) + (text.length > 40 ? "\u2026" : "") + "\u201d";
            $("desk-clip").textContent = ok ? "Copied from the desktop: " + shown :
                "The desktop copied " + shown + "; this browser did not let the page put it on your clipboard";
        };
        if (navigator.clipboard && navigator.clipboard.writeText) {
            navigator.clipboard.writeText(text).then(() => said(true), () => said(false));
        } else {
            said(false);
        }
    });
    rfb.addEventListener("disconnect", (e) => {
        clearInterval(tick);
        if (!e.detail.clean && firstFrame) {
            state.textContent = "Disconnected: " + (state.textContent.replace(/^Disconnected: /, "") || "the desktop closed");
        }
        rfb = null;
    });
    $("desk-back").onclick = () => {
        if (rfb) rfb.disconnect();
        show("home");
        refresh();
    };
}

document.addEventListener("paste", (e) => {
    if (rfb && !$("desktop").hidden) {
        rfb.clipboardPasteFrom(e.clipboardData.getData("text/plain"));
    }
});

$("launch-back").addEventListener("click", () => {
    if (rfb) rfb.disconnect();
    show("home");
    refresh();
});

for (const r of document.querySelectorAll('input[name="open-in"]')) {
    r.checked = r.value === openIn();
    r.addEventListener("change", () => {
        localStorage.setItem(openInKey, r.value);
        refresh();
    });
}

refresh();
// The sessions stay fresh while they show (every 10 s); the resources, whose answers are
// the broker's dry runs, when the page comes back into view and every minute. While a
// desktop shows, the sessions' call keeps the portal's session from idling out.
let ticks = 0;
setInterval(() => {
    ticks++;
    if ($("home").hidden) {
        if (rfb) api("GET", "/v1/sessions").catch(() => {});
    } else if (!document.hidden) {
        loadSessions();
        if (ticks % 6 === 0) loadResources();
    }
}, 10000);
document.addEventListener("visibilitychange", () => {
    if (!document.hidden && !$("home").hidden) refresh();
});
