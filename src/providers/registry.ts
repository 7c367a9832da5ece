import { standardWebhooks } from "./standard-webhooks";
import type { ProviderAdapter } from "./types";

/** Every scheme the receiver understands, by the `provider = "…"` name used in wrangler.toml. */
const adapters: readonly ProviderAdapter[] = [standardWebhooks];

export const providers: ReadonlyMap<string, ProviderAdapter> = new Map(
  adapters.flatMap((adapter) => [[adapter.provider, adapter] as const]),
);

/** Svix signs with the Standard Webhooks scheme; the alias keeps configs readable. */
export const providerAliases: Readonly<Record<string, string>> = { svix: "standard-webhooks" };

export function adapterFor(provider: string): ProviderAdapter | undefined {
  return providers.get(providerAliases[provider] ?? provider);
}

export function knownProviderNames(): Set<string> {
  return new Set([...providers.keys(), ...Object.keys(providerAliases)]);
}
