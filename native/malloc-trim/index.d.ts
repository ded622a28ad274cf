/** Whether this build calls glibc's malloc_trim (false on other C libraries, where trim does nothing). */
export declare const available: boolean;
/** malloc_trim(0): true when some memory was given back to the system. */
export declare function trim(): boolean;
