import { eventually } from './eventually.ts';
import type { TestServer } from './server.ts';

/** Uploads of users files to POST /api/v2/jobs/users-imports, as the SDKs and the console send them. */

/** A multipart body as a browser or an SDK sends it: its bytes and its content type (with the boundary). */
export async function multipart(
  parts: Record<string, string | Blob>,
): Promise<{ payload: Buffer; contentType: string }> {
  const form = new FormData();
  for (const [name, value] of Object.entries(parts)) {
    if (value instanceof Blob) form.append(name, value, 'users.json');
    else form.append(name, value);
  }
  const request = new Request('http://localhost/', { method: 'POST', body: form });
  return { payload: Buffer.from(await request.arrayBuffer()), contentType: request.headers.get('content-type')! };
}

export const file = (users: unknown[] | string) =>
  new Blob([typeof users === 'string' ? users : JSON.stringify(users)], { type: 'application/json' });

export async function upload(
  server: TestServer,
  parts: Record<string, string | Blob>,
  options: { token?: string | null; host?: string } = {},
) {
  const { payload, contentType } = await multipart(parts);
  return server.request({
    method: 'POST',
    url: '/api/v2/jobs/users-imports',
    payload,
    token: options.token,
    headers: { 'content-type': contentType, ...(options.host ? { host: options.host } : {}) },
  });
}

export async function finished(server: TestServer, id: string, token?: string) {
  return eventually(`job ${id} finished`, async () => {
    const response = await server.request({ method: 'GET', url: `/api/v2/jobs/${id}`, token });
    const job = response.json() as { status: string };
    return job.status === 'completed' || job.status === 'failed' ? job : undefined;
  });
}
