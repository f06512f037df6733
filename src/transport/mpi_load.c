/* mpi_load.c: finds and loads the MPI transport plugin (mpi.h) on first use. libbaton itself never links
 * an MPI library: `ldd build/baton` shows none, and a build without Open MPI's headers still builds. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/mpi.h"
#include "util/util.h"

#ifndef BATON_LIBDIR
#define BATON_LIBDIR "/usr/local/lib"
#endif

static void host_debug(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    BATON_DEBUG("%s", buf);
}

_Static_assert((int)BATON_MPI_WAIT_SPIN == (int)BATON__WAIT_SPIN &&
                   (int)BATON_MPI_WAIT_YIELD == (int)BATON__WAIT_YIELD && (int)BATON_MPI_WAIT_NAP == (int)BATON__WAIT_NAP,
               "the plugin's wait modes are the backoff's");
static const baton_mpi_host host_ = {
    .abi = BATON_MPI_PLUGIN_ABI, .fail = baton__fail, .debug = host_debug, .wait_mode = baton__backoff_wait_mode};

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static const baton_mpi_plugin *plugin_;

/* The directory of the object that holds this code (libbaton.so, or the program libbaton.a is linked into). */
static void own_dir(char *out, size_t n) {
    Dl_info info;
    out[0] = '\0';
    if (dladdr((void *)own_dir, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        snprintf(out, n, "%s", info.dli_fname);
    } else {
        ssize_t len = readlink("/proc/self/exe", out, n - 1);
        out[len > 0 ? len : 0] = '\0';
    }
    char *slash = strrchr(out, '/');
    if (slash) *slash = '\0';
    else out[0] = '\0';
}

static void *try_open(const char *path, char *errs, size_t n) {
    /* RTLD_GLOBAL: Open MPI's own components (dlopened by libmpi) resolve libmpi's symbols globally. */
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h && strchr(path, '/') && access(path, F_OK) == 0) {
        size_t used = strlen(errs);
        snprintf(errs + used, n - used, "; %s", dlerror());
    }
    return h;
}

int baton__mpi_load(const baton_mpi_plugin **out) {
    pthread_mutex_lock(&load_mu);
    if (plugin_) {
        *out = plugin_;
        pthread_mutex_unlock(&load_mu);
        return BATON_OK;
    }
    char dir[PATH_MAX], path[PATH_MAX + 64], errs[1024] = "";
    void *h = NULL;
    const char *env = getenv("BATON_MPI_PLUGIN");
    if (env && *env) {
        h = try_open(env, errs, sizeof errs);
        if (!h) {
            pthread_mutex_unlock(&load_mu);
            return baton__fail(BATON_EUNSUPPORTED, "BATON_MPI_PLUGIN='%s' cannot be loaded%s", env,
                               errs[0] ? errs : " (no such file)");
        }
    }
    own_dir(dir, sizeof dir);
    const char *cands[] = {"%s/" BATON_MPI_PLUGIN_NAME, "%s/../" BATON_MPI_PLUGIN_NAME};
    for (size_t i = 0; !h && dir[0] && i < sizeof cands / sizeof cands[0]; i++) {
        snprintf(path, sizeof path, cands[i], dir);
        h = try_open(path, errs, sizeof errs);
    }
    if (!h) h = try_open(BATON_LIBDIR "/" BATON_MPI_PLUGIN_NAME, errs, sizeof errs);
    if (!h) h = try_open(BATON_MPI_PLUGIN_NAME, errs, sizeof errs);
    if (!h) {
        pthread_mutex_unlock(&load_mu);
        return baton__fail(BATON_EUNSUPPORTED,
                           "--transport mpi needs the MPI plugin %s, which was not found next to %s%s: it is built "
                           "when Open MPI's headers are installed (apt-get install libopenmpi-dev, then make), or set "
                           "BATON_MPI_PLUGIN to its path",
                           BATON_MPI_PLUGIN_NAME, dir[0] ? dir : "the program", errs);
    }
    baton_mpi_plugin_fn fn = (baton_mpi_plugin_fn)(uintptr_t)dlsym(h, BATON_MPI_PLUGIN_SYMBOL);
    const baton_mpi_plugin *p = fn ? fn(&host_) : NULL;
    if (!p || p->abi != BATON_MPI_PLUGIN_ABI) {
        dlclose(h);
        pthread_mutex_unlock(&load_mu);
        return baton__fail(BATON_EUNSUPPORTED, "the MPI plugin %s does not match this baton (rebuild both)",
                           BATON_MPI_PLUGIN_NAME);
    }
    plugin_ = p; /* never unloaded: libmpi cannot be re-initialized anyway */
    *out = p;
    pthread_mutex_unlock(&load_mu);
    return BATON_OK;
}
