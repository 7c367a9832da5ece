/**
 * The exit codes, the same for every command (docs/cli.md lists them):
 *   0 done; 1 it ran and failed (a delivery refused, check found problems, an unexpected error);
 *   2 the command line is wrong (an unknown option, a malformed id or value);
 *   3 what it names does not exist (a source, receipt, event key, sample or fingerprint);
 *   4 the setup is missing or unreachable (no receiver, no .dev.vars or config, a token or secret not set).
 */
export const EXIT = Object.freeze({ failed: 1, usage: 2, notFound: 3, setup: 4 });

/**
 * Every failure the CLI expects ends as one line saying what went wrong and what to do; index.mjs prints it and
 * exits with its code (EXIT). Anything else is a bug, and even then the user sees one line (with --debug for the
 * trace).
 */
export class CliError extends Error {
  /**
   * @param {string} message what went wrong, then what to do, as one line
   * @param {number} [exitCode] one of EXIT
   */
  constructor(message, exitCode = EXIT.failed) {
    super(message);
    this.name = "CliError";
    this.exitCode = exitCode;
  }
}

/** The receiver could not be reached at all (refused, not found, no answer): a command that waits may try again. */
export class ReceiverUnreachable extends CliError {}

/**
 * Turns a failed fetch into the one line a person needs. Node's fetch throws `TypeError: fetch failed` with the
 * socket error as its cause, which says nothing useful on its own.
 * @param {string} baseUrl the receiver (or other server) the CLI tried to reach
 * @param {unknown} error
 */
export function unreachable(baseUrl, error) {
  const cause = /** @type {{ cause?: { code?: string, message?: string, errors?: { code?: string }[] } }} */ (error)
    ?.cause;
  // localhost resolves to both ::1 and 127.0.0.1, and then the refusal arrives as an AggregateError of both.
  const code = cause?.code ?? cause?.errors?.[0]?.code ?? /** @type {{ code?: string }} */ (error)?.code;
  if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "ECONNRESET") {
    return new ReceiverUnreachable(
      `no receiver at ${baseUrl}: run npm start (or set RECEIVER_URL to where it runs)`,
      EXIT.setup,
    );
  }
  if (/** @type {{ name?: string }} */ (error)?.name === "TimeoutError") {
    return new ReceiverUnreachable(
      `the receiver at ${baseUrl} did not answer in time: is it stuck? Restart npm start`,
      EXIT.setup,
    );
  }
  return new ReceiverUnreachable(
    `could not reach ${baseUrl} (${code ?? cause?.message ?? /** @type {Error} */ (error)?.message ?? "unknown error"}): check RECEIVER_URL`,
    EXIT.setup,
  );
}
