declare global {
  namespace Cloudflare {
    /** The test Stripe endpoint secret (test/fixtures/secrets/reconcile.json); src reads its settings untyped. */
    interface Env {
      RECONCILE_STRIPE_WEBHOOK_SECRET: string;
    }
  }
}

export {};
