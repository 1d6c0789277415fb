// The browser kiosk: a WebRTC call with an ephemeral key, the assistant on a media track, and
// captions of what the visitor heard. Plain JS, no build step; the backend (backend.py) serves it.
//
// The page never sees the API key. It asks its backend for an ephemeral key, posts its SDP offer
// to the API with that key, and tells the backend the call's id (the answer's Location header) so
// the backend can attach to the call's sideband and run the tools there.
//
// Captions hold only what was heard. Over WebRTC the transcript arrives ahead of the speech (the
// model writes faster than it talks), so a caption grows with the audio this page has played:
// the played time of a reply (from output_audio_buffer.started until now, or until .stopped /
// .cleared, less the receiver's jitter-buffer delay) over the reply's audio length (its audio
// tokens in response.done, 50 ms each), cut back to a word end. After a barge-in the server's
// truncation point (conversation.item.truncated.audio_end_ms) caps it too. An estimate: the
// transcript carries no word timings.
"use strict";

const AUDIO_MS_PER_TOKEN = 50;
const EVENT_LOG_LIMIT = 400;

const kiosk = (() => {
  const state = {
    phase: "idle", // idle → connecting → live → ended | error
    callId: null,
    error: null,
    events: [], // the types received, oldest first (bounded)
    outputDelayMs: 0, // the receiver's jitter-buffer delay, from getStats
  };
  const responses = new Map(); // response id → {items: [item id], audioMs, startedAt, endedAt, complete, cut}
  const items = new Map(); // item id → {responseId, text, serverCutMs, li}
  const tools = []; // {name, arguments, answered}
  let pc = null;
  let channel = null;
  let timers = [];

  const $ = (id) => document.getElementById(id);

  function setStatus(text, phase) {
    state.phase = phase;
    $("status").textContent = text;
    $("status").dataset.state = phase === "live" ? "live" : phase === "error" ? "error" : "idle";
  }

  function addLine(kind, text) {
    const li = document.createElement("li");
    li.className = kind;
    li.textContent = text;
    $("captions").appendChild(li);
    li.scrollIntoView({ block: "end" });
    return li;
  }

  function response(id) {
    if (!responses.has(id)) {
      responses.set(id, { items: [], audioMs: null, startedAt: null, endedAt: null, complete: false, cut: false });
    }
    return responses.get(id);
  }

  // What was heard.

  function playedMs(r) {
    if (r.startedAt === null) return 0;
    const end = r.endedAt === null ? performance.now() : r.endedAt;
    return Math.max(0, end - r.startedAt - state.outputDelayMs);
  }

  function atWordEnd(text, fraction) {
    if (fraction >= 1) return text;
    const n = Math.floor(text.length * Math.max(0, fraction));
    if (n >= text.length || /\s/.test(text[n])) return text.slice(0, n).trimEnd();
    const space = text.lastIndexOf(" ", n);
    return space <= 0 ? "" : text.slice(0, space).trimEnd();
  }

  function heard(itemId) {
    const item = items.get(itemId);
    const r = responses.get(item.responseId);
    if (r === undefined) return { text: "", ms: 0, itemMs: null };
    // The reply's audio shared among its spoken items by their text length (one item, usually).
    const spoken = r.items.map((id) => items.get(id)).filter((it) => it.text.length > 0);
    const chars = spoken.reduce((sum, it) => sum + it.text.length, 0);
    if (r.complete && !r.cut && item.serverCutMs === null) return { text: item.text, ms: null, itemMs: null };
    if (r.audioMs === 0) return { text: item.text, ms: null, itemMs: 0 }; // a text reply: nothing to hear, all to read
    if (r.audioMs === null || chars === 0) return { text: "", ms: 0, itemMs: null };
    let offset = 0;
    for (const it of spoken) {
      if (it === item) break;
      offset += (r.audioMs * it.text.length) / chars;
    }
    const itemMs = (r.audioMs * item.text.length) / chars;
    let ms = Math.min(Math.max(0, playedMs(r) - offset), itemMs);
    if (item.serverCutMs !== null) ms = Math.min(ms, item.serverCutMs);
    return { text: atWordEnd(item.text, itemMs > 0 ? ms / itemMs : 0), ms, itemMs };
  }

  function render() {
    for (const [id, item] of items) {
      const shown = heard(id).text;
      const r = responses.get(item.responseId);
      const cut = item.serverCutMs !== null || (r !== undefined && r.cut);
      const text = shown || (cut ? "" : "…");
      if (item.li.textContent !== text) item.li.textContent = text;
      item.li.classList.toggle("cut", cut);
    }
  }

  async function measureOutputDelay() {
    if (pc === null) return;
    const stats = await pc.getStats();
    stats.forEach((s) => {
      if (s.type === "inbound-rtp" && s.kind === "audio" && s.jitterBufferEmittedCount > 0) {
        state.outputDelayMs = (1000 * s.jitterBufferDelay) / s.jitterBufferEmittedCount;
      }
    });
  }

  // Server events.

  function onEvent(ev) {
    state.events.push(ev.type);
    if (state.events.length > EVENT_LOG_LIMIT) state.events.shift();
    const now = performance.now();
    switch (ev.type) {
      case "session.created":
        setStatus("Listening — ask about the weather.", "live");
        break;
      case "input_audio_buffer.speech_started":
        addLine("visitor", "(the visitor speaks)");
        break;
      case "response.output_item.added": {
        const item = ev.item;
        if (item.type === "message") {
          response(ev.response_id).items.push(item.id);
          items.set(item.id, { responseId: ev.response_id, text: "", serverCutMs: null, li: addLine("assistant", "…") });
        } else if (item.type === "function_call") {
          tools.push({ name: item.name, arguments: null, answered: false, li: addLine("tool", `Looking up ${item.name}…`) });
        }
        break;
      }
      case "response.output_audio_transcript.delta":
      case "response.output_text.delta": {
        const item = items.get(ev.item_id);
        if (item !== undefined) item.text += ev.delta;
        break;
      }
      case "response.output_audio_transcript.done": {
        const item = items.get(ev.item_id);
        if (item !== undefined && typeof ev.transcript === "string") item.text = ev.transcript;
        break;
      }
      case "response.function_call_arguments.done": {
        const tool = tools.find((t) => t.name === ev.name && t.arguments === null);
        if (tool !== undefined) tool.arguments = ev.arguments;
        break;
      }
      case "conversation.item.added":
      case "conversation.item.created":
        if (ev.item && ev.item.type === "function_call_output") {
          const tool = tools.find((t) => !t.answered);
          if (tool !== undefined) {
            tool.answered = true;
            tool.li.textContent = `${tool.name} answered (run by the backend)`;
          }
        }
        break;
      case "output_audio_buffer.started":
        response(ev.response_id).startedAt = now;
        $("stop").disabled = false;
        break;
      case "output_audio_buffer.stopped": {
        const r = response(ev.response_id);
        r.endedAt = now;
        r.complete = true;
        $("stop").disabled = true;
        break;
      }
      case "output_audio_buffer.cleared": {
        const r = response(ev.response_id);
        if (r.endedAt === null) r.endedAt = now;
        r.cut = true;
        $("stop").disabled = true;
        break;
      }
      case "conversation.item.truncated": {
        const item = items.get(ev.item_id);
        if (item !== undefined) item.serverCutMs = ev.audio_end_ms;
        break;
      }
      case "response.done": {
        const details = (ev.response.usage || {}).output_token_details || {};
        if (typeof details.audio_tokens === "number") response(ev.response.id).audioMs = details.audio_tokens * AUDIO_MS_PER_TOKEN;
        break;
      }
      case "error":
        console.warn("server error:", ev.error && ev.error.message);
        break;
    }
    render();
  }

  // The call.

  async function postJSON(path) {
    const reply = await fetch(path, { method: "POST" });
    const body = await reply.json();
    if (!reply.ok) throw new Error(body.error || `${path}: HTTP ${reply.status}`);
    return body;
  }

  async function start() {
    if (state.phase !== "idle" && state.phase !== "ended" && state.phase !== "error") return state.callId;
    $("start").disabled = true;
    setStatus("Connecting…", "connecting");
    try {
      const session = await postJSON("/session"); // {value: ephemeral key, url, model}
      const mic = await navigator.mediaDevices.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
      });
      pc = new RTCPeerConnection();
      pc.ontrack = (e) => {
        $("assistant").srcObject = e.streams[0] || new MediaStream([e.track]);
      };
      pc.onconnectionstatechange = () => {
        if (pc !== null && (pc.connectionState === "failed" || pc.connectionState === "closed")) end("The call ended.");
      };
      pc.addTrack(mic.getAudioTracks()[0], mic);
      channel = pc.createDataChannel("oai-events");
      channel.onmessage = (e) => onEvent(JSON.parse(e.data));
      channel.onclose = () => end("The call ended.");
      await pc.setLocalDescription(await pc.createOffer());
      const answer = await fetch(`${session.url}/realtime/calls?model=${encodeURIComponent(session.model)}`, {
        method: "POST",
        body: pc.localDescription.sdp,
        headers: { Authorization: `Bearer ${session.value}`, "Content-Type": "application/sdp" },
      });
      const sdp = await answer.text();
      if (!answer.ok) throw new Error(`the call was refused: HTTP ${answer.status} ${sdp.slice(0, 200)}`);
      state.callId = (answer.headers.get("Location") || "").split("/").pop() || null;
      await pc.setRemoteDescription({ type: "answer", sdp });
      if (state.callId === null) throw new Error("the answer named no call (no Location header)");
      $("call").textContent = state.callId;
      await postJSON(`/calls/${state.callId}`); // the backend attaches to the sideband with the tools
      timers.push(setInterval(render, 100), setInterval(measureOutputDelay, 500));
      $("hangup").disabled = false;
      if (state.phase === "connecting") setStatus("Connected…", "connecting");
      return state.callId;
    } catch (err) {
      end(`Could not start: ${err.message}`, true);
      throw err;
    }
  }

  function stop() {
    // The visitor taps "stop": the server drops the unplayed audio and truncates what was cut.
    if (channel !== null && channel.readyState === "open") channel.send(JSON.stringify({ type: "output_audio_buffer.clear" }));
  }

  function end(message, failed = false) {
    if (state.phase === "ended" || (state.phase === "error" && !failed)) return;
    render();
    timers.forEach(clearInterval);
    timers = [];
    if (failed) state.error = message;
    setStatus(message, failed ? "error" : "ended");
    const closing = pc;
    pc = null;
    channel = null;
    if (closing !== null) closing.close();
    $("start").disabled = false;
    $("stop").disabled = true;
    $("hangup").disabled = true;
  }

  function snapshot() {
    const captions = [...items].map(([id, item]) => {
      const h = heard(id);
      const r = responses.get(item.responseId);
      return {
        item_id: id,
        response_id: item.responseId,
        shown: item.li.textContent,
        heard: h.text,
        heard_ms: h.ms,
        played_ms: r === undefined ? 0 : playedMs(r),
        item_ms: h.itemMs,
        full_text: item.text,
        server_cut_ms: item.serverCutMs,
        cut: item.serverCutMs !== null || (r !== undefined && r.cut),
      };
    });
    return {
      phase: state.phase,
      call_id: state.callId,
      error: state.error,
      output_delay_ms: state.outputDelayMs,
      events: [...state.events],
      responses: [...responses].map(([id, r]) => ({ id, complete: r.complete, cut: r.cut, audio_ms: r.audioMs })),
      tools: tools.map((t) => ({ name: t.name, arguments: t.arguments, answered: t.answered })),
      captions,
    };
  }

  // receive: one server event, as the data channel delivers it (also how the captions are tested)
  return { start, stop, hangup: () => end("Goodbye."), snapshot, receive: onEvent };
})();

window.kiosk = kiosk;
document.getElementById("start").addEventListener("click", () => kiosk.start().catch(() => {}));
document.getElementById("stop").addEventListener("click", () => kiosk.stop());
document.getElementById("hangup").addEventListener("click", () => kiosk.hangup());
