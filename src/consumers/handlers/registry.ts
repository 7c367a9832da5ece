import { accountsHandler } from "./accounts";
import type { WebhookHandler } from "./types";

/** In-Worker handlers by the name a source's `destination = "handler:<name>"` uses. Register yours here. */
const handlers: Readonly<Record<string, WebhookHandler>> = {
  accounts: accountsHandler,
};

export function handlerFor(name: string): WebhookHandler | undefined {
  return Object.hasOwn(handlers, name) ? handlers[name] : undefined;
}

export function handlerNames(): Set<string> {
  return new Set(Object.keys(handlers));
}
