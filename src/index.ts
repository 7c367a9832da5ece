import { app } from "./app";
import { consumeWork } from "./consumers/queue";
import type { QueuedWork } from "./model/work-message";
import { watchedReconcile } from "./reconcile/cron-watch";
import { RESTART_REQUEUE_CRON, requeueAfterRestart } from "./reconcile/restart-requeue";

export { ClaimShard } from "./claims/shard";
export { DeliveryGate } from "./gate/gate";
export { SystemMonitor } from "./reconcile/system-monitor";

export default {
  fetch: app.fetch,
  queue: consumeWork,
  // The cron's scheduled time is the reconciler's clock, so tests inject time through the controller. One string no
  // wrangler.toml schedules is `npm start`'s ask to refill the local queue after a restart (restart-requeue.ts).
  scheduled: async (controller, env) =>
    void (await (controller.cron === RESTART_REQUEUE_CRON
      ? requeueAfterRestart(env)
      : watchedReconcile(env, controller.scheduledTime))),
} satisfies ExportedHandler<Env, QueuedWork>;
