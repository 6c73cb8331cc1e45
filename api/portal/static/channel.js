// The browser's end of a desktop stream: the client end of session reliability (the Go
// package internal/resume) carried over WebSocket channels to the site's gateways (the Go
// package gateway, ChannelPath), shaped as the raw channel noVNC takes (send, close,
// binaryType, onopen, onmessage, onclose, onerror, protocol, readyState).
//
// A channel opens with the session's reconnect ticket; every gateway that admits one answers
// with the next ticket, which the next channel uses. The stream numbers what it sends and keeps
// it until the machine's agent acknowledges it; when a WebSocket breaks (its gateway died),
// the stream opens a channel through the next gateway and resumes from the last byte each end
// received. noVNC sees one connection throughout: nothing lost, doubled or reordered.

const enc = new TextEncoder();
const dec = new TextDecoder();

const FRAME_MAGIC = enc.encode("FDT1");
const HELLO_MAGIC = enc.encode("FDS1");
const MAX_DATA = 16 << 10;
const ACK_EVERY = 64 << 10;
const ACK_DELAY = 20; // ms
const MAX_BUFFER = 4 << 20;
const OPEN_TIMEOUT = 8000; // ms: a channel's WebSocket, ticket and hello
// To an agent whose reply names "ping": a ping every PING_EVERY, and a channel whose ping
// has been unanswered, with nothing else heard, for SILENCE is taken for broken (a gateway powered off sends no reset: a
// WebSocket would wait minutes for TCP to give up). The native client's TCP keepalives do
// the same in about 3 s.
const PING_EVERY = 500; // ms
const SILENCE = 1500; // ms

// Gateway statuses (package ticket) and stream replies (package resume).
const STATUS_OK = 0, STATUS_DENIED = 1, STATUS_ROTATED = 2, STATUS_LOGIN_EXPIRED = 3;
const REPLY_OK = 0, REPLY_UNKNOWN = 1, REPLY_UNAVAILABLE = 2;

function u64(b, off) {
    const v = new DataView(b.buffer, b.byteOffset + off, 8);
    return v.getUint32(0) * 2 ** 32 + v.getUint32(4);
}

function putU64(b, off, n) {
    const v = new DataView(b.buffer, b.byteOffset + off, 8);
    v.setUint32(0, Math.floor(n / 2 ** 32));
    v.setUint32(4, n >>> 0);
}

export class DeniedError extends Error {}

export class ResumableChannel {
    // gateways: [{name, url}] (url: the wss:// URL of the gateway's channel path for the
    // desktop's port), best first; ticket: the session's reconnect ticket; reliabilityMs: how
    // long to look for a gateway after a break; onEvent(kind, detail): "open" (a channel was
    // admitted: detail.gateway, detail.ms), "break", "resumed" (detail.gateway, detail.ms),
    // "ticket" (detail.ticket: the next reconnect ticket), "end" (detail.error).
    constructor({ gateways, ticket, reliabilityMs, onEvent }) {
        this.binaryType = "arraybuffer";
        this.protocol = "";
        this.readyState = "connecting";
        this.onopen = null;
        this.onmessage = null;
        this.onclose = null;
        this.onerror = null;

        this._gws = gateways;
        this._gwi = 0;
        this._ticket = ticket;
        this._reliabilityMs = reliabilityMs || 180000;
        this._event = onEvent || (() => {});
        this._id = crypto.getRandomValues(new Uint8Array(16));

        this._out = []; // sent by noVNC, not acknowledged: chunks from offset _base
        this._base = 0;
        this._outLen = 0;
        this._sent = 0; // the next offset to send on the current WebSocket
        this._recv = 0; // bytes delivered to noVNC
        this._acked = 0; // the last acknowledgement sent said this
        this._ackTimer = null;

        this._ws = null; // the WebSocket the stream runs on, once its hello is answered
        this._opened = false; // the agent holds the stream
        this._ended = false;
        this._brokeAt = 0;
        this._pinger = null;
        this._pingSent = new Map(); // token → when sent
        this._pingToken = 0;
        // rtt is the last round trip to the machine's agent, in ms (pings); 0 until known.
        this.rtt = 0;
        this.stats = { transports: 0, breaks: 0, resent: 0, duplicates: 0 };
        this._try(performance.now(), 0);
    }

    // noVNC's side.
    send(data) {
        if (this._ended) {
            return;
        }
        const b = new Uint8Array(data.buffer ? data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) : data);
        if (b.length === 0) {
            return;
        }
        this._out.push(b);
        this._outLen += b.length;
        if (this._outLen > MAX_BUFFER) {
            this._end(new Error("the desktop has not taken this page's input for too long"));
            return;
        }
        this._flush();
    }

    close() {
        if (this._ended) {
            return;
        }
        this._reset("the viewer closed");
        this._end(null);
    }

    // _try opens a channel through gateway i (of this._gws), started at t0 (for the times it
    // reports), trying the others in turn.
    _try(t0, tries) {
        if (this._ended) {
            return;
        }
        const first = !this._opened;
        if (!first && performance.now() - this._brokeAt > this._reliabilityMs) {
            this._end(new Error("no gateway took the desktop back in time"));
            return;
        }
        if (first && tries >= this._gws.length) {
            this._end(this._lastError || new Error("no gateway took the channel"));
            return;
        }
        const gw = this._gws[this._gwi % this._gws.length];
        const ws = new WebSocket(gw.url);
        ws.binaryType = "arraybuffer";
        let phase = "status";
        let inbuf = new Uint8Array(0);
        let done = false;
        const timer = setTimeout(() => fail(new Error("no answer from " + gw.name)), OPEN_TIMEOUT);
        const next = () => {
            this._gwi++;
            const wait = first ? 0 : Math.min(1000, 100 * 2 ** Math.min(tries, 4));
            setTimeout(() => this._try(t0, tries + 1), tries < this._gws.length ? 0 : wait);
        };
        const fail = (err) => {
            if (done) {
                return;
            }
            done = true;
            clearTimeout(timer);
            ws.onmessage = ws.onclose = ws.onerror = null;
            try { ws.close(); } catch (e) { /* already closed */ }
            if (this._ws === ws) {
                this._broke(err);
                return;
            }
            this._lastError = err;
            if (err instanceof DeniedError && err.final) {
                this._end(err);
                return;
            }
            next();
        };
        ws.onopen = () => {
            const tok = enc.encode(this._ticket);
            const f = new Uint8Array(6 + tok.length);
            f.set(FRAME_MAGIC, 0);
            new DataView(f.buffer).setUint16(4, tok.length);
            f.set(tok, 6);
            ws.send(f);
        };
        ws.onerror = () => fail(new Error("the channel through " + gw.name + " failed"));
        ws.onclose = () => fail(new Error("the channel through " + gw.name + " closed"));
        ws.onmessage = (ev) => {
            this._heard = performance.now();
            const b = new Uint8Array(ev.data);
            if (inbuf.length === 0) {
                inbuf = b;
            } else {
                const n = new Uint8Array(inbuf.length + b.length);
                n.set(inbuf, 0);
                n.set(b, inbuf.length);
                inbuf = n;
            }
            for (;;) {
                let used = 0;
                if (phase === "status") {
                    if (inbuf.length < 1) break;
                    const st = inbuf[0];
                    if (st === STATUS_OK) {
                        used = 1;
                        phase = "hello";
                    } else if (st === STATUS_ROTATED) {
                        if (inbuf.length < 7) break;
                        const n = new DataView(inbuf.buffer, inbuf.byteOffset + 5, 2).getUint16(0);
                        if (inbuf.length < 7 + n) break;
                        this._ticket = dec.decode(inbuf.subarray(7, 7 + n));
                        this._event("ticket", { ticket: this._ticket });
                        used = 7 + n;
                        phase = "hello";
                    } else {
                        const e = new DeniedError(st === STATUS_LOGIN_EXPIRED ?
                            "your sign-in is too old for this desktop: sign in again" :
                            gw.name + " denied the channel");
                        e.final = st === STATUS_LOGIN_EXPIRED;
                        fail(e);
                        return;
                    }
                    if (phase === "hello") {
                        ws.send(this._hello());
                        phase = "reply";
                    }
                } else if (phase === "reply") {
                    if (inbuf.length < 15) break;
                    const n = inbuf[14];
                    if (inbuf.length < 15 + n) break;
                    const status = inbuf[4], peerRecv = u64(inbuf, 5);
                    const reason = dec.decode(inbuf.subarray(15, 15 + n));
                    used = 15 + n;
                    if (status !== REPLY_OK) {
                        done = true;
                        clearTimeout(timer);
                        ws.onmessage = ws.onclose = ws.onerror = null;
                        ws.close();
                        if (status === REPLY_UNKNOWN) {
                            this._end(new Error("the desktop session is over"));
                        } else if (status === REPLY_UNAVAILABLE) {
                            this._end(new Error("the desktop server does not answer: " + reason));
                        } else {
                            this._end(new Error("the machine refused the desktop: " + reason));
                        }
                        return;
                    }
                    clearTimeout(timer);
                    phase = "frames";
                    this._attach(ws, peerRecv, gw, performance.now() - t0, fail, reason.split(" ").includes("ping"));
                } else {
                    used = this._frame(inbuf);
                    if (used === 0) break;
                    if (used < 0) {
                        return; // the stream ended
                    }
                }
                inbuf = inbuf.subarray(used);
                if (inbuf.length === 0) break;
            }
        };
    }

    _hello() {
        const h = new Uint8Array(30);
        h.set(HELLO_MAGIC, 0);
        h[4] = this._opened ? 1 : 0;
        h.set(this._id, 5);
        putU64(h, 21, this._recv);
        h[29] = 0;
        return h;
    }

    // _attach makes ws the stream's transport, the agent having received peerRecv bytes.
    _attach(ws, peerRecv, gw, ms, fail, pings) {
        if (peerRecv < this._base || peerRecv > this._base + this._outLen) {
            this._end(new Error("the machine's stream does not match this page's"));
            return;
        }
        this._trim(peerRecv);
        if (this.stats.transports > 0) {
            this.stats.resent += this._base + this._outLen - peerRecv;
        }
        this.stats.transports++;
        this._ws = ws;
        this._sent = this._base;
        ws.onclose = () => fail(new Error("the channel through " + gw.name + " closed"));
        ws.onerror = () => fail(new Error("the channel through " + gw.name + " failed"));
        const firstTime = !this._opened;
        this._opened = true;
        this._sendAck();
        this._flush();
        clearInterval(this._pinger);
        this._pingSent.clear();
        this._heard = performance.now();
        if (pings) {
            const ping = () => {
                if (this._ws !== ws || ws.readyState !== WebSocket.OPEN) return;
                // A ping unanswered for SILENCE, with nothing else heard since it went out.
                const now = performance.now();
                for (const at of this._pingSent.values()) {
                    if (now - at > SILENCE && this._heard <= at) {
                        fail(new Error("nothing from " + gw.name + " for " + SILENCE / 1000 + " s"));
                        return;
                    }
                }
                const f = new Uint8Array(9);
                f[0] = 0x50;
                putU64(f, 1, ++this._pingToken);
                this._pingSent.set(this._pingToken, performance.now());
                ws.send(f);
            };
            ping();
            this._pinger = setInterval(ping, PING_EVERY);
        }
        if (firstTime) {
            this.readyState = "open";
            this._event("open", { gateway: gw.name, ms });
            if (this.onopen) this.onopen(new Event("open"));
        } else {
            this._event("resumed", { gateway: gw.name, ms });
        }
    }

    // _frame takes one frame from b: the bytes used, 0 when b holds no whole frame, -1 when
    // the stream ended.
    _frame(b) {
        switch (b[0]) {
        case 0x44: { // 'D'
            if (b.length < 11) return 0;
            const n = new DataView(b.buffer, b.byteOffset + 9, 2).getUint16(0);
            if (b.length < 11 + n) return 0;
            const off = u64(b, 1);
            if (n === 0 || n > MAX_DATA || off > this._recv) {
                this._protocolError("data at " + off + ", received " + this._recv);
                return -1;
            }
            const skip = this._recv - off;
            if (skip < n) {
                const data = b.slice(11 + skip, 11 + n);
                this._recv += data.length;
                this.stats.duplicates += skip;
                if (this.onmessage) this.onmessage({ data: data.buffer });
                if (this._recv - this._acked >= ACK_EVERY) {
                    this._sendAck();
                } else if (!this._ackTimer) {
                    this._ackTimer = setTimeout(() => { this._ackTimer = null; this._sendAck(); }, ACK_DELAY);
                }
            } else {
                this.stats.duplicates += n;
            }
            return 11 + n;
        }
        case 0x41: { // 'A'
            if (b.length < 10) return 0;
            const got = u64(b, 1);
            if (got > this._base + this._outLen) {
                this._protocolError("acknowledgement of bytes never sent");
                return -1;
            }
            this._trim(got);
            return 10;
        }
        case 0x51: { // 'Q': a pong
            if (b.length < 9) return 0;
            const tok = u64(b, 1), at = this._pingSent.get(tok);
            if (at !== undefined) {
                this.rtt = performance.now() - at;
                this._pingSent.delete(tok);
            }
            return 9;
        }
        case 0x46: // 'F': the desktop server closed the connection
            if (b.length < 9) return 0;
            this._reset("the viewer saw the end");
            this._end(null);
            return -1;
        case 0x52: { // 'R'
            if (b.length < 2) return 0;
            const n = b[1];
            if (b.length < 2 + n) return 0;
            const reason = dec.decode(b.subarray(2, 2 + n));
            this._end(new Error("the machine ended the desktop stream" + (reason ? ": " + reason : "")));
            return -1;
        }
        default:
            this._protocolError("frame type " + b[0]);
            return -1;
        }
    }

    _protocolError(what) {
        this._reset("protocol error");
        this._end(new Error("the desktop stream broke its protocol: " + what));
    }

    _trim(off) {
        while (this._base < off && this._out.length > 0) {
            const c = this._out[0];
            const k = Math.min(c.length, off - this._base);
            if (k === c.length) {
                this._out.shift();
            } else {
                this._out[0] = c.subarray(k);
            }
            this._base += k;
            this._outLen -= k;
        }
        if (this._sent < this._base) {
            this._sent = this._base;
        }
    }

    // _range copies n bytes from offset off of what is kept.
    _range(off, n) {
        const r = new Uint8Array(n);
        let at = this._base, w = 0;
        for (const c of this._out) {
            if (w === n) break;
            if (at + c.length > off) {
                const from = Math.max(0, off - at);
                const k = Math.min(c.length - from, n - w);
                r.set(c.subarray(from, from + k), w);
                w += k;
                off += k;
            }
            at += c.length;
        }
        return r;
    }

    _flush() {
        const ws = this._ws;
        if (!ws || ws.readyState !== WebSocket.OPEN) {
            return;
        }
        const end = this._base + this._outLen;
        while (this._sent < end) {
            const n = Math.min(end - this._sent, MAX_DATA);
            const f = new Uint8Array(11 + n);
            f[0] = 0x44;
            putU64(f, 1, this._sent);
            new DataView(f.buffer).setUint16(9, n);
            f.set(this._range(this._sent, n), 11);
            ws.send(f);
            this._sent += n;
        }
    }

    _sendAck() {
        if (this._ackTimer) {
            clearTimeout(this._ackTimer);
            this._ackTimer = null;
        }
        const ws = this._ws;
        if (!ws || ws.readyState !== WebSocket.OPEN) {
            return;
        }
        const f = new Uint8Array(10);
        f[0] = 0x41;
        putU64(f, 1, this._recv);
        ws.send(f);
        this._acked = this._recv;
    }

    _reset(reason) {
        const ws = this._ws;
        if (!ws || ws.readyState !== WebSocket.OPEN) {
            return;
        }
        const r = enc.encode(reason).subarray(0, 255);
        const f = new Uint8Array(2 + r.length);
        f[0] = 0x52;
        f[1] = r.length;
        f.set(r, 2);
        ws.send(f);
    }

    // _broke forgets the current WebSocket after it failed and looks for another gateway,
    // starting with the next one.
    _broke(err) {
        if (this._ended) {
            return;
        }
        this._ws = null;
        this.stats.breaks++;
        this._brokeAt = performance.now();
        this._event("break", { error: err });
        this._gwi++;
        this._try(performance.now(), 0);
    }

    _end(err) {
        if (this._ended) {
            return;
        }
        this._ended = true;
        clearInterval(this._pinger);
        if (this._ackTimer) {
            clearTimeout(this._ackTimer);
        }
        const ws = this._ws;
        this._ws = null;
        if (ws) {
            ws.onmessage = ws.onclose = ws.onerror = null;
            try { ws.close(); } catch (e) { /* closed already */ }
        }
        const wasOpen = this.readyState === "open";
        this.readyState = "closed";
        this._event("end", { error: err });
        if (err && this.onerror) this.onerror(new Event("error"));
        if (this.onclose && (wasOpen || err)) {
            this.onclose({ code: err ? 1006 : 1000, reason: err ? err.message : "", wasClean: !err });
        }
    }
}
