import { adyen } from "./adyen";
import { asana } from "./asana";
import { awsSns } from "./aws-sns";
import { dropbox } from "./dropbox";
import { ed25519 } from "./ed25519";
import { generic } from "./generic";
import { github } from "./github";
import { gitlab } from "./gitlab";
import { intercom } from "./intercom";
import { linear } from "./linear";
import { mailgun } from "./mailgun";
import { meta } from "./meta";
import { microsoftGraph } from "./microsoft-graph";
import { monday } from "./monday";
import { netlify } from "./netlify";
import { notion } from "./notion";
import { okta } from "./okta";
import { paddle } from "./paddle";
import { plaid } from "./plaid";
import { presetAdapters } from "./presets";
import { sendgrid } from "./sendgrid";
import { shopify } from "./shopify";
import { refusingOversized } from "./signed";
import { slack } from "./slack";
import { square } from "./square";
import { standardWebhooks } from "./standard-webhooks";
import { stripe } from "./stripe";
import { twilio } from "./twilio";
import { twitch } from "./twitch";
import type { ProviderAdapter } from "./types";
import { zoom } from "./zoom";

/** Every scheme the receiver understands, by the `provider = "…"` name used in wrangler.toml. */
const adapters: readonly ProviderAdapter[] = [
  standardWebhooks,
  stripe,
  github,
  shopify,
  slack,
  twilio,
  paddle,
  linear,
  square,
  twitch,
  zoom,
  gitlab,
  intercom,
  mailgun,
  sendgrid,
  ed25519,
  meta,
  dropbox,
  okta,
  microsoftGraph,
  asana,
  notion,
  monday,
  netlify,
  adyen,
  awsSns,
  plaid,
  // Senders written as data over the shared preset scheme (src/providers/presets.ts); dropbox is wrapped above.
  ...presetAdapters.filter((adapter) => adapter.provider !== "dropbox"),
  generic,
];

/**
 * Every adapter's verification, with an oversized header or an unverified body over its limits refused the same way
 * (src/providers/unverified.ts), whether the adapter is built on the shared pipeline or written out (Adyen, SNS).
 */
function refusingOverLimits(adapter: ProviderAdapter): ProviderAdapter {
  return { ...adapter, verify: (input) => refusingOversized(() => adapter.verify(input)) };
}

export const providers: ReadonlyMap<string, ProviderAdapter> = new Map(
  adapters.flatMap((adapter) => [[adapter.provider, refusingOverLimits(adapter)] as const]),
);

/** Senders that use another adapter's scheme unchanged; the alias keeps configs readable. */
export const providerAliases: Readonly<Record<string, string>> = {
  svix: "standard-webhooks",
  // Standard Webhooks senders by name: Clerk and Resend deliver through Svix (svix-* headers), Brex and OpenAI
  // send webhook-* headers; one scheme either way.
  clerk: "standard-webhooks",
  resend: "standard-webhooks",
  brex: "standard-webhooks",
  openai: "standard-webhooks",
  discord: "ed25519",
  // Meta's products share one app-level scheme and handshake.
  whatsapp: "meta",
  instagram: "meta",
  messenger: "meta",
};

export function adapterFor(provider: string): ProviderAdapter | undefined {
  return providers.get(providerAliases[provider] ?? provider);
}

export function knownProviderNames(): Set<string> {
  return new Set([...providers.keys(), ...Object.keys(providerAliases)]);
}
