/* baton/status.h: status codes shared by every layer.
 *
 * Runtime failures return a negative baton_status; 0 is success. The table below is the single source of
 * the enum, baton_strerror() and baton_status_name(). A call that fails also leaves a one-line detail in a
 * thread-local buffer (baton_last_error()), e.g. "rank 3 died during allreduce #17 (connection closed)".
 *
 *   int rc = baton_allreduce(comm, buf, buf, n, BATON_F32, BATON_SUM);
 *   if (rc < 0) fprintf(stderr, "allreduce: %s: %s\n", baton_strerror(rc), baton_last_error());
 */
#ifndef BATON_STATUS_H
#define BATON_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define BATON_STATUS_MAP(X)                                              \
    X(OK, 0, "success")                                                  \
    X(EINVAL, -1, "invalid argument")                                    \
    X(ENOMEM, -2, "out of memory")                                       \
    X(EIO, -3, "input/output error")                                     \
    X(ETIMEDOUT, -4, "timed out")                                        \
    X(EPEERDEAD, -5, "a peer rank died or closed its connection")        \
    X(EAUTH, -6, "authentication failed")                                \
    X(EPROTO, -7, "protocol error (malformed or unexpected message)")    \
    X(EMISMATCH, -8, "collective mismatch between ranks")                \
    X(ENOTFOUND, -9, "not found")                                        \
    X(EFORMAT, -10, "bad file format")                                   \
    X(ESYS, -11, "system call failed")                                   \
    X(EUNSUPPORTED, -12, "not supported")                                \
    X(ECANCELED, -13, "canceled")                                        \
    X(ERANGE, -14, "value out of range")

typedef enum {
#define BATON_STATUS_ENUM_(name, value, msg) BATON_##name = value,
    BATON_STATUS_MAP(BATON_STATUS_ENUM_)
#undef BATON_STATUS_ENUM_
} baton_status;

/* "timed out" for BATON_ETIMEDOUT; "unknown status" for anything not in the table. */
const char *baton_strerror(int status);
/* "BATON_ETIMEDOUT" for BATON_ETIMEDOUT. */
const char *baton_status_name(int status);
/* The detail of the last failure on this thread ("" if none). Valid until the next failing call. */
const char *baton_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
