/*
 * glibc's malloc_trim(0) for Node-API. free() gives memory back to the system only from the top of
 * the main heap, and only above a threshold that glibc raises as large blocks come and go; the free
 * pages between live blocks stay resident. malloc_trim(0) returns every free page of every arena
 * (madvise), which an idle server asks for once a busy stretch is over (src/heap.ts).
 * Elsewhere than glibc (musl, macOS) `available` is false and trim() does nothing.
 */
#include <node_api.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  int released = 0;
#ifdef __GLIBC__
  released = malloc_trim(0);
#endif
  napi_value result;
  napi_get_boolean(env, released != 0, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value trim, available;
  napi_create_function(env, "trim", NAPI_AUTO_LENGTH, Trim, NULL, &trim);
  napi_set_named_property(env, exports, "trim", trim);
#ifdef __GLIBC__
  napi_get_boolean(env, 1, &available);
#else
  napi_get_boolean(env, 0, &available);
#endif
  napi_set_named_property(env, exports, "available", available);
  return exports;
}
