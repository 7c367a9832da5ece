/** The hub of one `listen:<name>` destination: one Durable Object per name (./hub.ts). */
export function listenHub(env: Pick<Env, "LISTEN_HUBS">, listenName: string) {
  return env.LISTEN_HUBS.get(env.LISTEN_HUBS.idFromName(listenName));
}
