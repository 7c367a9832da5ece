import { InteractionResponseType, InteractionType, verifyKey } from "discord-interactions";
import { describe, expect, it } from "vitest";
import {
  adapterContract,
  claimAnswer,
  expectAccepted,
  expectRejectedAndNothingWritten,
  header,
  nowSeconds,
  secretValue,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { ed25519Sign } from "./support/signers";

// Discord-style senders (provider "discord", an alias of "ed25519"): hex Ed25519 over timestamp ‖ body.
function signEd25519(secretName: string, body: string, timestamp: number) {
  return {
    body,
    headers: {
      "x-signature-ed25519": ed25519Sign(secretName, String(timestamp), body).toString("hex"),
      "x-signature-timestamp": String(timestamp),
      "content-type": "application/json",
    },
  };
}

const interaction = (interactionId: string) =>
  JSON.stringify({
    id: interactionId,
    type: 2,
    application_id: "app1",
    data: { id: `cmd-${interactionId}`, name: "ping" },
  });

adapterContract({
  name: "ed25519",
  sign: ({ secretName, eventKey, timestamp }) => signEd25519(secretName, interaction(eventKey), timestamp),
  expected: ({ eventKey }) => ({ eventKey, eventType: "2", subjectId: `cmd-${eventKey}` }),
  signatureHeaders: ["x-signature-ed25519", "x-signature-timestamp"],
  malformEncoding: (request) =>
    withHeader(request, "x-signature-ed25519", header(request, "x-signature-ed25519").slice(1)),
  junkSignature: (request) => withHeader(request, "x-signature-ed25519", "00".repeat(64)),
  timestamped: true,
});

describe("ed25519: compatibility", () => {
  it("Discord's own verifier (discord-interactions verifyKey) accepts the interaction the route accepts", async () => {
    const timestamp = nowSeconds();
    const request = signEd25519("PV_ED25519_CURRENT", interaction(uniqueKey("discord_lib")), timestamp);
    const publicKey = secretValue("ed25519", "CURRENT");
    expect(await verifyKey(request.body, request.headers["x-signature-ed25519"], String(timestamp), publicKey)).toBe(
      true,
    );
    expect(
      await verifyKey(
        request.body,
        request.headers["x-signature-ed25519"],
        String(timestamp),
        secretValue("ed25519", "TEST"),
      ),
    ).toBe(false);
    await expectAccepted("pv-ed25519", request);
  });
});

describe("ed25519: PING handshake", () => {
  it("answers a verified PING with {type: 1} and claims nothing", async () => {
    const before = await storedCounts("pv-ed25519");
    const response = await send(
      "pv-ed25519",
      signEd25519("PV_ED25519_CURRENT", JSON.stringify({ id: "ping-1", type: 1 }), nowSeconds()),
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ type: 1 });
    expect(await storedCounts("pv-ed25519")).toEqual(before);
  });

  it("an unverified PING is refused", async () => {
    await expectRejectedAndNothingWritten(
      "pv-ed25519",
      signEd25519("PV_ED25519_UNLISTED", JSON.stringify({ id: "ping-2", type: 1 }), nowSeconds()),
    );
  });
});

/**
 * Discord's own documented payloads (developer docs: Webhook Events, and Receiving and Responding to
 * Interactions), signed with an Ed25519 key the source lists. Webhook Events: type 0 is the PING, type 1 an
 * event; both answered 204 with no body. Interactions other than PING get an interaction response.
 */
const discordWebhookPing = { version: 1, application_id: "1234567765431056709", type: 0 };
const discordApplicationAuthorized = (timestamp: string) => ({
  version: 1,
  application_id: "1234560123453231555",
  type: 1,
  event: {
    type: "APPLICATION_AUTHORIZED",
    timestamp,
    data: {
      integration_type: 1,
      scopes: ["applications.commands"],
      user: {
        avatar: "abcd1234",
        avatar_decoration_data: null,
        clan: null,
        discriminator: "0",
        global_name: "Shay",
        id: "777777777777777777",
        public_flags: 0,
        username: "shaydewael",
      },
    },
  },
});
const discordSlashCommand = (interactionId: string) => ({
  type: InteractionType.APPLICATION_COMMAND,
  token: "A_UNIQUE_TOKEN",
  member: {
    user: {
      id: "53908232506183680",
      username: "Mason",
      avatar: "a_d5efa99b3eeaa7dd43acca82f5692432",
      discriminator: "1337",
      public_flags: 131141,
    },
    roles: ["539082325061836999"],
    premium_since: null,
    permissions: "2147483647",
    pending: false,
    nick: null,
    mute: false,
    joined_at: "2017-03-13T19:19:14.040000+00:00",
    is_pending: false,
    deaf: false,
  },
  id: interactionId,
  guild_id: "290926798626357999",
  app_permissions: "442368",
  guild_locale: "en-US",
  locale: "en-US",
  data: {
    options: [{ type: 3, name: "cardname", value: "The Gitrog Monster" }],
    type: 1,
    name: "cardsearch",
    id: "771825006014889984",
  },
  channel_id: "645027906669510667",
});

describe("ed25519: Discord Webhook Events", () => {
  it("answers the webhook PING (type 0) 204 with no body and claims nothing", async () => {
    const before = await storedCounts("pv-ed25519");
    const response = await send(
      "pv-ed25519",
      signEd25519("PV_ED25519_CURRENT", JSON.stringify(discordWebhookPing), nowSeconds()),
    );
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
    expect(await storedCounts("pv-ed25519")).toEqual(before);
  });

  it("claims an event (type 1) under its type, answers 204, and a resend is a duplicate", async () => {
    const timestamp = new Date(Date.now() - Math.floor(Math.random() * 1e9)).toISOString().replace("Z", "");
    const request = signEd25519(
      "PV_ED25519_CURRENT",
      JSON.stringify(discordApplicationAuthorized(timestamp)),
      nowSeconds(),
    );
    const response = await send("pv-ed25519", request);
    expect(response.status).toBe(204);
    expect(await response.text()).toBe("");
    const receiptId = response.headers.get("x-webhook-receipt")!;
    expect(response.headers.get("x-webhook-disposition")).toBe("accepted");
    const stored = await storedReceipt("pv-ed25519", receiptId);
    expect(stored.eventType).toBe("APPLICATION_AUTHORIZED");
    expect(stored.eventKey).toMatch(/^[0-9a-f]{64}$/);

    const again = await send("pv-ed25519", request);
    expect(again.status).toBe(204);
    expect(await claimAnswer(again)).toEqual({ status: "duplicate", receipt: receiptId });
  });
});

describe("ed25519: Discord interactions get an interaction response", () => {
  it("a slash command is claimed under its id and answered with a deferred channel message", async () => {
    const interactionId = uniqueKey("discord_command");
    const response = await send(
      "pv-ed25519",
      signEd25519("PV_ED25519_CURRENT", JSON.stringify(discordSlashCommand(interactionId)), nowSeconds()),
    );
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ type: InteractionResponseType.DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE });
    const stored = await storedReceipt("pv-ed25519", response.headers.get("x-webhook-receipt")!);
    expect(stored.eventKey).toBe(interactionId);
  });

  it("a component defers an update of its message; autocomplete gets an empty choice list", async () => {
    const component = {
      ...discordSlashCommand(uniqueKey("discord_component")),
      type: InteractionType.MESSAGE_COMPONENT,
      data: { custom_id: "click_one", component_type: 2 },
    };
    const clicked = await send(
      "pv-ed25519",
      signEd25519("PV_ED25519_CURRENT", JSON.stringify(component), nowSeconds()),
    );
    expect(await clicked.json()).toEqual({ type: InteractionResponseType.DEFERRED_UPDATE_MESSAGE });

    const autocomplete = {
      ...discordSlashCommand(uniqueKey("discord_autocomplete")),
      type: InteractionType.APPLICATION_COMMAND_AUTOCOMPLETE,
    };
    const suggested = await send(
      "pv-ed25519",
      signEd25519("PV_ED25519_CURRENT", JSON.stringify(autocomplete), nowSeconds()),
    );
    expect(await suggested.json()).toEqual({
      type: InteractionResponseType.APPLICATION_COMMAND_AUTOCOMPLETE_RESULT,
      data: { choices: [] },
    });
  });
});
