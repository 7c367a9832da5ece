import { type HandlerPlan, PermanentFailure, type WebhookHandler } from "./types";

/**
 * The shipped example domain, driven by the demo source, the bench and outside checks:
 *   account.credited      {account, amount}         adds amount to credits
 *   account.plan_changed  {account, plan, version}  applies only when version > plan_version
 */

function field(payload: unknown, name: string): unknown {
  const data = (payload as { data?: Record<string, unknown> } | undefined)?.data;
  return data && typeof data === "object" ? data[name] : undefined;
}

function accountId(payload: unknown): string {
  const account = field(payload, "account");
  if (typeof account !== "string" || account.length === 0 || account.length > 128) {
    throw new PermanentFailure("data.account must be a non-empty string");
  }
  return account;
}

export const accountsHandler: WebhookHandler = async (event, { db }): Promise<HandlerPlan> => {
  switch (event.eventType) {
    case "account.credited": {
      const account = accountId(event.payload);
      const amount = field(event.payload, "amount");
      if (typeof amount !== "number" || !Number.isSafeInteger(amount)) {
        throw new PermanentFailure("data.amount must be an integer");
      }
      return {
        outcome: "apply",
        statements: [
          db
            .prepare(
              `INSERT INTO accounts (id, credits) VALUES (?, ?)
               ON CONFLICT (id) DO UPDATE SET credits = credits + excluded.credits`,
            )
            .bind(account, amount),
        ],
      };
    }
    case "account.plan_changed": {
      const account = accountId(event.payload);
      const plan = field(event.payload, "plan");
      const version = event.version ?? field(event.payload, "version");
      if (typeof plan !== "string" || plan.length === 0) throw new PermanentFailure("data.plan must be a string");
      if (typeof version !== "number" || !Number.isSafeInteger(version) || version < 1) {
        throw new PermanentFailure("data.version must be a positive integer");
      }
      return {
        outcome: "apply",
        statements: [],
        versionGate: {
          // The effect is its own gate: it changes the row only when this version is newer than the stored one.
          claim: db
            .prepare(
              `INSERT INTO accounts (id, plan, plan_version) VALUES (?, ?, ?)
               ON CONFLICT (id) DO UPDATE SET plan = excluded.plan, plan_version = excluded.plan_version
               WHERE accounts.plan_version < excluded.plan_version`,
            )
            .bind(account, plan, version),
          readStored: db.prepare("SELECT plan_version AS version FROM accounts WHERE id = ?").bind(account),
          version,
          orderedBy: "version",
        },
      };
    }
    default:
      return { outcome: "skip", reason: `no accounts handler for type ${JSON.stringify(event.eventType)}` };
  }
};
