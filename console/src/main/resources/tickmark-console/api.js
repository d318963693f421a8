// Same-origin calls to the public API. The renter's API key and the operator token live in
// sessionStorage (gone when the tab closes, never sent as a cookie) and travel only as a bearer
// header. Errors come back as ApiError with the problem+json code and detail.

const KEY = "tickmark.apiKey";
const OPERATOR = "tickmark.operatorToken";

export const session = {
  key: () => sessionStorage.getItem(KEY),
  setKey: (k) => (k ? sessionStorage.setItem(KEY, k) : sessionStorage.removeItem(KEY)),
  operator: () => sessionStorage.getItem(OPERATOR),
  setOperator: (t) => (t ? sessionStorage.setItem(OPERATOR, t) : sessionStorage.removeItem(OPERATOR)),
};

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail ? `${detail} (${code})` : code);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

function headers(auth, extra) {
  const h = { Accept: "application/json", ...extra };
  const token = auth === "operator" ? session.operator() : auth === "key" ? session.key() : null;
  if (auth && !token)
    throw new ApiError(401, "unauthorized", auth === "operator" ? "sign in with the operator token first" : "sign in with an API key first");
  if (token) h.Authorization = `Bearer ${token}`;
  return h;
}

// auth: null (public), "key" (the renter's/provider's API key) or "operator".
export async function call(method, path, { auth = "key", body, signal, idempotencyKey } = {}) {
  const extra = {};
  if (body !== undefined) extra["Content-Type"] = "application/json";
  if (idempotencyKey) extra["Idempotency-Key"] = idempotencyKey;
  const response = await fetch(path, {
    method,
    headers: headers(auth, extra),
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    credentials: "omit",
    cache: "no-store",
  });
  if (response.status === 204) return null;
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, json?.code ?? `http_${response.status}`, json?.detail ?? text.slice(0, 200));
  }
  return json;
}

export const get = (path, opts) => call("GET", path, opts);
export const post = (path, body, opts) => call("POST", path, { ...opts, body });
export const put = (path, body, opts) => call("PUT", path, { ...opts, body });
export const del = (path, opts) => call("DELETE", path, opts);

// Follows a text/event-stream with fetch, since EventSource cannot send the Authorization header
// the API asks for. Calls onEvent({event, data, id}) per event; resolves when the stream closes
// (the server's end, or the signal aborting it). lastEventId resumes a log stream exactly.
export async function follow(path, { auth = "key", signal, lastEventId, onEvent }) {
  const extra = { Accept: "text/event-stream" };
  if (lastEventId) extra["Last-Event-ID"] = String(lastEventId);
  const response = await fetch(path, { headers: headers(auth, extra), signal, credentials: "omit", cache: "no-store" });
  if (!response.ok) {
    let json = null;
    try {
      json = await response.json();
    } catch {
      json = null;
    }
    throw new ApiError(response.status, json?.code ?? `http_${response.status}`, json?.detail ?? "");
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let split;
    while ((split = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, split);
      buffer = buffer.slice(split + 2);
      const event = { event: "message", data: "", id: null };
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue; // a keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const v = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event.event = v;
        else if (field === "data") data.push(v);
        else if (field === "id") event.id = v;
      }
      if (data.length === 0) continue;
      event.data = data.join("\n");
      onEvent(event);
    }
  }
}
