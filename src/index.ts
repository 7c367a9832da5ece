import { app } from "./app";
import { consumeWork } from "./consumers/queue";
import type { WorkMessage } from "./relay/messages";

export { ClaimShard } from "./claims/shard";

export default {
  fetch: app.fetch,
  queue: consumeWork,
} satisfies ExportedHandler<Env, WorkMessage>;
