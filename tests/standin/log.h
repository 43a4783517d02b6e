/* STANDIN_LOG: both stand-in libraries append lookup events to one file, so a test can read the
 * runtime's whole conversation with the driver in order. */
#ifndef STANDIN_LOG_H
#define STANDIN_LOG_H

__attribute__((visibility("hidden"), format(printf, 1, 2))) void standin_log(const char *fmt, ...);

#endif
