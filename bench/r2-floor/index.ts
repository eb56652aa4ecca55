// GET /?u=<url>: fetches the URL and puts its body into R2 as it comes (a native stream: the
// bytes never reach JavaScript), then answers the stored size. GET /health answers ok.
export default {
  async fetch(req: Request, env: { BLOBS: R2Bucket }): Promise<Response> {
    const url = new URL(req.url);
    if (url.pathname === "/health") return new Response("ok");
    const r = await fetch(url.searchParams.get("u")!);
    await env.BLOBS.put("floor", r.body);
    return new Response(String((await env.BLOBS.head("floor"))?.size ?? 0));
  },
};
