import { app } from "./app";
import { consumeWork } from "./consumers/queue";
import { watchedReconcile } from "./reconcile/cron-watch";
import type { QueuedWork } from "./model/work-message";

export { ClaimShard } from "./claims/shard";
export { SystemMonitor } from "./reconcile/system-monitor";

export default {
  fetch: app.fetch,
  queue: consumeWork,
  // The cron's scheduled time is the reconciler's clock, so tests inject time through the controller.
  scheduled: async (controller, env) => void (await watchedReconcile(env, controller.scheduledTime)),
} satisfies ExportedHandler<Env, QueuedWork>;
