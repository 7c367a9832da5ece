import { accountsHandler } from "./accounts";
import type { WebhookHandler } from "./types";

/**
 * In-Worker handlers by the name a source's `destination = "handler:<name>"` uses. Add yours to `builtIn`, or
 * call `registerHandler` at module load — before the first request, because sources are checked against these
 * names when the configuration is parsed.
 */
const builtIn: Readonly<Record<string, WebhookHandler>> = {
  accounts: accountsHandler,
};

const handlers = new Map<string, WebhookHandler>(Object.entries(builtIn));

export function handlerFor(name: string): WebhookHandler | undefined {
  return handlers.get(name);
}

export function handlerNames(): Set<string> {
  return new Set(handlers.keys());
}

/** Adds a handler under `name`; returns a function that removes it again (for tests that register their own). */
export function registerHandler(name: string, handler: WebhookHandler): () => void {
  if (handlers.has(name)) throw new Error(`a handler named ${name} is already registered`);
  handlers.set(name, handler);
  return () => {
    if (handlers.get(name) === handler) handlers.delete(name);
  };
}
