import { app } from "./app";
import { consumeWork } from "./consumers/queue/queue";
import { LOCAL_FAULT_CRON_PREFIX, switchLocalFault } from "./lib/local-faults";
import type { QueuedWork } from "./model/work-message";
import { watchedReconcile } from "./reconcile/cron-watch";
import { RESTART_REQUEUE_CRON, requeueAfterRestart } from "./reconcile/restart-requeue";

export { ClaimShard } from "./claims/shard";
export { DeliveryGate } from "./gate/gate";
export { ListenHub } from "./listen/hub";
export { SystemMonitor } from "./reconcile/system-monitor";

export default {
  fetch: app.fetch,
  queue: consumeWork,
  // The cron's scheduled time is the reconciler's clock, so tests inject time through the controller. Strings no
  // wrangler.toml schedules are local-only asks: `npm start`'s to refill the local queue after a restart
  // (restart-requeue.ts), and the faulted soak's to switch an outage on or off (src/lib/local-faults.ts).
  scheduled: async (controller, env) => {
    if (controller.cron.startsWith(LOCAL_FAULT_CRON_PREFIX)) return switchLocalFault(env, controller.cron);
    await (controller.cron === RESTART_REQUEUE_CRON
      ? requeueAfterRestart(env)
      : watchedReconcile(env, controller.scheduledTime));
  },
} satisfies ExportedHandler<Env, QueuedWork>;
