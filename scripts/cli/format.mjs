// Terminal formatting shared by tail and show: local clock times, durations, and a little colour when the output
// is a terminal (never when piped, so scripts and tests read plain text).

const useColour = process.stdout.isTTY && !process.env.NO_COLOR;
const paint = (/** @type {string} */ code) => (/** @type {string} */ text) =>
  useColour ? `\x1b[${code}m${text}\x1b[0m` : text;
export const dim = paint("2");
const green = paint("32");
const red = paint("31");
const yellow = paint("33");

/** @param {number | null | undefined} epochMs */
export function clock(epochMs) {
  if (epochMs === null || epochMs === undefined) return "—";
  const at = new Date(epochMs);
  const pad = (/** @type {number} */ n, width = 2) => String(n).padStart(width, "0");
  return `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}.${pad(at.getMilliseconds(), 3)}`;
}

/** @param {number | null | undefined} epochMs */
export function dateTime(epochMs) {
  return epochMs === null || epochMs === undefined ? "—" : new Date(epochMs).toISOString();
}

/** @param {number | null | undefined} ms */
export function duration(ms) {
  if (ms === null || ms === undefined) return "";
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 0)} s`;
}

/** A status word coloured by what it means for the operator. */
export function status(/** @type {string} */ word) {
  if (word === "processed" || word === "accepted" || word === "replayed") return green(word);
  if (word === "dead" || word === "failed" || word === "quarantined") return red(word);
  if (word === "pending" || word === "processing" || word === "retry" || word === "stale" || word === "skipped")
    return yellow(word);
  return word;
}

/**
 * Sender-chosen text (event keys and types, header values, bodies, errors that quote them) made safe for a
 * terminal: control characters (C0 but tab, DEL, C1) and the bidirectional overrides that reorder what is shown
 * are printed as visible `\x1b` / `\u202e` escapes, so a sender can neither move the cursor, clear the screen,
 * retitle the window nor disguise a line. Newlines are kept only where the text is meant to span lines (a body).
 * @param {unknown} text
 * @param {{ multiline?: boolean }} [options]
 */
export function printable(text, { multiline = false } = {}) {
  if (text === null || text === undefined) return "";
  return String(text).replace(
    /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (character) => {
      if (multiline && character === "\n") return character;
      const code = character.charCodeAt(0);
      return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
    },
  );
}
