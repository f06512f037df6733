/* mpi.h: the MPI transport, a plugin. build/libbaton-mpi.so (src/transport/mpi_plugin.c, built with
 * mpicc.openmpi when Open MPI's headers are installed) links libmpi; libbaton and the baton command do not:
 * baton__mpi_load() dlopens the plugin the first time --transport mpi is asked for, so a build without
 * MPI, and every job that does not use it, never loads an MPI library.
 *
 * The plugin exports one symbol, baton_mpi_plugin_v1(host), returning the table below. It calls nothing of
 * libbaton's: errors go through host->fail (baton__fail), and transport.h's inline helpers are all it shares.
 *
 *   const baton_mpi_plugin *p;
 *   if ((rc = baton__mpi_load(&p)) < 0) return rc;                 // "not built: install libopenmpi-dev ..."
 *   if ((rc = p->init(join_timeout_s, &rank, &world)) < 0) ...     // MPI_Init_thread under a watchdog
 *   p->bcast(buf, n, 0);                                           // bootstrap: store address and secret
 *   p->transport_open(rank, world, &t);                            // point-to-point over MPI_COMM_WORLD's dup
 *   ... t->ops->sendrecv(...) ...; t->ops->close(t);
 *   p->finalize();                                                 // MPI_Finalize, on a clean exit only
 *
 * Data path (mpi_plugin.c): every message starts with one MPI message of at most BATON_MPI_FIRST_BYTES of
 * payload behind a 16-byte transport prefix (payload length, segment size) and the communicator's opaque
 * header, received into a staging buffer and checked (length, then hdr->check) before any payload byte is
 * copied out; the rest of the payload follows in segments sent and received straight from and to the
 * caller's buffers, all posted at once (MPI_Isend / MPI_Irecv) and progressed with MPI_Testsome, the send
 * and the receive together. Completed leading segments are reported to the progress callback as they land. */
#ifndef BATON_TRANSPORT_MPI_H
#define BATON_TRANSPORT_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define BATON_MPI_PLUGIN_ABI 2
#define BATON_MPI_PLUGIN_SYMBOL "baton_mpi_plugin_v1"
#define BATON_MPI_PLUGIN_NAME "libbaton-mpi.so"

/* What libbaton gives the plugin. */
typedef struct {
    int abi;                                               /* BATON_MPI_PLUGIN_ABI */
    int (*fail)(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
    void (*debug)(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
    /* How the calling thread waits (baton__backoff_wait_mode): BATON_MPI_WAIT_SPIN (a busy poll first),
     * _YIELD (polls between sched_yield calls from the start: this node's ranks outnumber its CPUs, so the
     * rank waited for may share this CPU) or _NAP (a comm thread sharing its one CPU with the caller's work:
     * a short poll). Every wait naps after its poll. Set for the process before the transport is opened;
     * per thread after. */
    int (*wait_mode)(void);
} baton_mpi_host;
enum { BATON_MPI_WAIT_SPIN = 0, BATON_MPI_WAIT_YIELD = 1, BATON_MPI_WAIT_NAP = 2 };

typedef struct {
    int abi;                                               /* BATON_MPI_PLUGIN_ABI */
    const char *library;                                   /* MPI_Get_library_version's first line */
    /* MPI_Init_thread (MPI_THREAD_SERIALIZED) unless MPI is initialized already; a watchdog ends the process
     * with a message naming the timeout when MPI_Init has not returned within timeout_s. Sets MCA defaults
     * (docs/cluster.md) that the user did not set. */
    int (*init)(double timeout_s, int *rank, int *world);
    /* MPI_Bcast of bytes from root over the plugin's communicator (bootstrap only). */
    int (*bcast)(void *buf, size_t bytes, int root);
    int (*transport_open)(int rank, int world, baton_transport **out);
    /* MPI_Finalize if init called MPI_Init (not if the program had initialized MPI itself). */
    void (*finalize)(void);
} baton_mpi_plugin;

typedef const baton_mpi_plugin *(*baton_mpi_plugin_fn)(const baton_mpi_host *host);

/* Loads the plugin once (BATON_MPI_PLUGIN, else libbaton-mpi.so next to the library or program that holds
 * libbaton, or in its parent directory, or the installed library directory, or the loader's search path).
 * Fails with BATON_EUNSUPPORTED and a message saying how to get it. */
int baton__mpi_load(const baton_mpi_plugin **out);

#endif
