// Lev's error answers in words for the popup: the code stays machine-readable (`error`), the `message` says what
// to do. The codes are Lev's own (openapi.yaml's Error enum) plus the extension's: not_connected, unreachable,
// unsupported_page, nothing_selected.

export function fail(error, message, extra = {}) {
  return { ok: false, error, message, ...extra };
}

const minutes = (sec) => Math.max(1, Math.ceil((sec || 60) / 60));

export function inWords(status, body) {
  const d = body && typeof body === "object" ? body : {};
  const code = d.error || `http_${status}`;
  switch (code) {
    case "invalid_token":
    case "missing_bearer_token":
      return fail(code, "Lev no longer accepts this connection (it expired or was revoked). Connect again in the extension's settings.");
    case "capability_denied":
      return fail(code, "This connection can only read. Connect again and allow write, or paste a token that can write.");
    case "payment_required":
      return fail(code, `Your ${d.tier || "current"} plan cannot connect apps (cap ${d.cap}, used ${d.used}). Upgrade the plan on your Lev server.`);
    case "quota_exceeded":
      return fail(code, d.message || `The monthly transcription minutes of your ${d.tier || "current"} plan are used up; they renew next month.`);
    case "rate_limited":
      if (d.limit === "monthly_writes") {
        return fail(code, `This connection has used this month's saves; more are possible in ${Math.ceil((d.retry_after_sec || 86400) / 86400)} day(s), or connect with a token that has a larger cap.`, { retry_after_sec: d.retry_after_sec });
      }
      return fail(code, `Too many saves in a short time: Lev takes more in ${minutes(d.retry_after_sec)} minute(s).`, { retry_after_sec: d.retry_after_sec });
    case "file_too_large":
      return fail(code, "This page is larger than 5 MB, the most Lev takes for a saved page. Save the link instead (right-click it).");
    case "folder_not_found":
      return fail(code, "That folder no longer exists: choose another one.");
    case "forbidden_scope":
      return fail(code, d.message || "This connection cannot use that folder.");
    case "not_found":
      return fail(code, "Lev could not find that: it may have been deleted.");
    case "unavailable":
      return fail(code, "Lev is busy or restarting: try again in a minute.");
    default:
      return fail(code, d.message ? `Lev could not save this: ${d.message}.`.replace(/\.\.$/, ".") : `Lev answered HTTP ${status}.`);
  }
}
