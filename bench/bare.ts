/**
 * The baseline: a bare node:http server on 127.0.0.1 answering every request, once its body is read,
 * with the recorded status, headers and body (the JSON file given as the only argument).
 */
import fs from 'node:fs';
import http from 'node:http';
import { serveAsChild } from './child-server.ts';
import type { RecordedResponse } from './lib.ts';

const recorded = JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as RecordedResponse;
const body = Buffer.from(recorded.bodyBase64, 'base64');
const server = http.createServer((request, response) => {
  request.on('data', () => {});
  request.on('end', () => {
    response.writeHead(recorded.status, recorded.headers);
    response.end(body);
  });
});
serveAsChild(server);
