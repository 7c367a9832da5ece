/**
 * The receiver as the bench's poison phase deploys it (bench/lib/poison.ts): the real Worker, plus one handler that
 * exists only in this entry point. No wrangler.toml of the repository names this file, so no deployed Worker can
 * reach the handler; the bench writes a config of its own, in its state directory, whose `main` is this file.
 */

import { accountsHandler } from "../../src/handlers/accounts";
import { registerHandler } from "../../src/handlers/registry";
import worker from "../../src/index";
import { POISON_HANDLER } from "./names";

// Every Durable Object class the real entry exports, whatever it gains: wrangler refuses a config naming one not exported.
export * from "../../src/index";

/** Longer than the phase ever waits: the runtime is always killed first. A timer, not a bare never-settling
 * promise, so workerd sees pending I/O and lets the attempt hang instead of cancelling it as a deadlock. */
const HANG_MS = 60 * 60_000;

// The demo domain's handler, except for the one event whose body is marked: its attempt never returns, as an
// attempt that kills its isolate never does. The phase SIGKILLs the runtime while it hangs.
registerHandler(POISON_HANDLER, async (event, context) => {
  const data = (event.payload as { data?: { hang?: unknown } } | null)?.data;
  if (data?.hang === true) {
    await new Promise((resolve) => setTimeout(resolve, HANG_MS));
    throw new Error("the bench's poison event was never killed");
  }
  return accountsHandler(event, context);
});

export default worker;
