'use strict';
// Built by `npm ci` (node-gyp) where a C compiler is present; an optional dependency of Tenantry, which
// runs without it (src/heap.ts).
module.exports = require('./build/Release/malloc_trim.node');
