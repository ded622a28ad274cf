/**
 * The baseline: a bare node:http server on 127.0.0.1 answering every request, once its body is read,
 * with the recorded status, headers and body (the JSON file given as the only argument). Over HTTPS
 * (node:https, the same handler) when TLS_CERT_FILE and TLS_KEY_FILE are set, as Tenantry's are.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { serveAsChild } from './child-server.ts';
import type { RecordedResponse } from './lib.ts';

const recorded = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as RecordedResponse;
const body = Buffer.from(recorded.bodyBase64, 'base64');
const handler: http.RequestListener = (request, response) => {
  request.on('data', () => {});
  request.on('end', () => {
    response.writeHead(recorded.status, recorded.headers);
    response.end(body);
  });
};
const { TLS_CERT_FILE: cert, TLS_KEY_FILE: key } = process.env;
const server =
  cert && key
    ? https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, handler)
    : http.createServer(handler);
serveAsChild(server as http.Server);
