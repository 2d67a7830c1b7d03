/*
 * netfs: a read-only FUSE passthrough that reads like a network file system.
 *
 * Every read request the kernel sends (a page-cache miss, a readahead, an
 * mmap fault) waits for a slot (at most --in-flight requests are served at
 * once, a counting semaphore shared by FUSE's worker threads), then for
 * --latency-ms (the round trip), then is read from the backing directory,
 * then, with --bandwidth, waits until its bytes have crossed a link of that
 * many bytes a second shared by every request (first come, first served; no
 * burst), and only then frees its slot. Requests and bytes are counted.
 *
 * The mount goes through the page cache as NFS does (no direct_io; a file's
 * cached pages are kept across opens, as NFS keeps them while the file is
 * unchanged), so "cold" means evicted (posix_fadvise DONTNEED through the
 * mount). The kernel's own readahead window for FUSE is 128 KiB, as NFS's
 * has been since Linux 5.4: a buffered read() or page fault sends requests of
 * at most 128 KiB, readahead(2) and POSIX_FADV_WILLNEED up to 1 MiB (FUSE's
 * max_pages, 256 pages as libfuse asks); NFS sends up to rsize (often 1 MiB)
 * for both. Each request is one round trip here.
 *
 * The counters are read from the file /.netfs-stats at the mount root (JSON,
 * not listed by readdir, read direct so every read is fresh, never counted
 * or delayed) and printed to stderr at unmount. max_in_flight is the most
 * requests served at once since the mount; peak_in_flight the same since the
 * stats file was last opened (each open starts a new peak).
 *
 *   netfs BACKING MOUNTPOINT [--latency-ms=1] [--in-flight=32]
 *         [--bandwidth=BYTES_PER_S] [--open-latency-ms=0]
 *         [--max-background=N] [--threads=N] [--fail-control=PATH] [-o FUSE_OPTION,...]
 *
 * --fail-control=PATH injects the storage's transient errors: when the file
 * PATH (outside the mount) appears, holding "OFFSET LENGTH COUNT", it is read
 * and removed, and the next COUNT read requests of any file that overlap
 * [OFFSET, OFFSET + LENGTH) fail with EIO (counted in read_errors), as a
 * soft-mounted NFS share answers while its server is away; then reads pass
 * again.
 *
 * Runs in the foreground until unmounted (fusermount3 -u MOUNTPOINT) or sent
 * SIGINT/SIGTERM/SIGHUP, which unmount. Built by bench/netfs.py.
 */
#define FUSE_USE_VERSION 312
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define STATS_NAME "/.netfs-stats"
/* Request-size buckets: <= 4 KiB, <= 8 KiB, ..., <= 1 MiB, larger. */
#define SIZE_BUCKETS 10

struct options {
  char *latency_ms;
  char *open_latency_ms;
  char *in_flight;
  char *bandwidth;
  char *max_background;
  char *threads;
  char *fail_control;
};

static struct {
  char backing[PATH_MAX];
  char *mountpoint;
  uint64_t latency_ns;
  uint64_t open_latency_ns;
  unsigned in_flight;
  double bandwidth; /* bytes a second; 0: no cap */
  unsigned max_background;
  unsigned threads;
  char *fail_control; /* NULL: no errors injected */
} cfg;

static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint64_t offset, length, count;
} fail;

/* Whether this read request is one to fail (--fail-control). */
static int injected_failure(off_t offset, size_t size) {
  if (!cfg.fail_control) return 0;
  pthread_mutex_lock(&fail_lock);
  FILE *f = fopen(cfg.fail_control, "r");
  if (f) {
    unsigned long long o = 0, l = 0, c = 0;
    if (fscanf(f, "%llu %llu %llu", &o, &l, &c) == 3) {
      fail.offset = o;
      fail.length = l;
      fail.count = c;
    }
    fclose(f);
    unlink(cfg.fail_control);
  }
  int hit = fail.count > 0 && (uint64_t)offset < fail.offset + fail.length &&
            fail.offset < (uint64_t)offset + size;
  if (hit) --fail.count;
  pthread_mutex_unlock(&fail_lock);
  return hit;
}

static sem_t slots;
static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t link_free_ns; /* when the link has sent every byte queued */
static uint64_t start_ns;

static struct {
  atomic_uint_fast64_t reads, read_bytes, asked_bytes, read_errors;
  atomic_uint_fast64_t opens, getattrs, readdirs;
  atomic_uint_fast64_t in_flight, max_in_flight;
  atomic_uint_fast64_t peak_in_flight; /* since the stats file was last opened */
  atomic_uint_fast64_t slot_wait_ns, link_wait_ns, busy_ns;
  atomic_uint_fast64_t sizes[SIZE_BUCKETS];
} stats;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t deadline_ns) {
  /* FUSE's threads are libfuse's: shrink the timer slack (50 us by default)
   * the first time each one sleeps, so that 1 ms means 1 ms. */
  static __thread int slack_set;
  if (!slack_set) {
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    slack_set = 1;
  }
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                        .tv_nsec = (long)(deadline_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static int backing_path(const char *path, char *out) {
  int n = snprintf(out, PATH_MAX, "%s%s", cfg.backing, path);
  return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int is_stats(const char *path) { return strcmp(path, STATS_NAME) == 0; }

static int stats_json(char *out, size_t cap) {
  size_t n = 0;
  n += (size_t)snprintf(
      out + n, cap - n,
      "{\"latency_ms\": %.3f, \"open_latency_ms\": %.3f, \"in_flight_limit\": %u, "
      "\"bandwidth_bytes_per_s\": %.0f, \"max_background\": %u, \"threads\": %u, "
      "\"uptime_s\": %.3f, \"reads\": %" PRIu64 ", \"read_bytes\": %" PRIu64
      ", \"asked_bytes\": %" PRIu64 ", \"read_errors\": %" PRIu64 ", \"opens\": %" PRIu64
      ", \"getattrs\": %" PRIu64 ", \"readdirs\": %" PRIu64 ", \"in_flight\": %" PRIu64
      ", \"max_in_flight\": %" PRIu64 ", \"peak_in_flight\": %" PRIu64 ", \"slot_wait_s\": %.6f, \"link_wait_s\": %.6f"
      ", \"busy_s\": %.6f, \"read_sizes_kib\": {",
      cfg.latency_ns / 1e6, cfg.open_latency_ns / 1e6, cfg.in_flight, cfg.bandwidth,
      cfg.max_background, cfg.threads, (now_ns() - start_ns) / 1e9,
      (uint64_t)stats.reads, (uint64_t)stats.read_bytes, (uint64_t)stats.asked_bytes,
      (uint64_t)stats.read_errors, (uint64_t)stats.opens, (uint64_t)stats.getattrs,
      (uint64_t)stats.readdirs, (uint64_t)stats.in_flight, (uint64_t)stats.max_in_flight,
      (uint64_t)stats.peak_in_flight, stats.slot_wait_ns / 1e9, stats.link_wait_ns / 1e9, stats.busy_ns / 1e9);
  for (int b = 0; b < SIZE_BUCKETS && n < cap; ++b) {
    const char *sep = b ? ", " : "";
    if (b == SIZE_BUCKETS - 1) {
      n += (size_t)snprintf(out + n, cap - n, "%s\"more\": %" PRIu64, sep,
                            (uint64_t)stats.sizes[b]);
    } else {
      n += (size_t)snprintf(out + n, cap - n, "%s\"%d\": %" PRIu64, sep, 4 << b,
                            (uint64_t)stats.sizes[b]);
    }
  }
  if (n < cap) n += (size_t)snprintf(out + n, cap - n, "}}\n");
  return n < cap ? (int)n : -1;
}

static void *netfs_init(struct fuse_conn_info *conn, struct fuse_config *fc) {
  fc->use_ino = 1;       /* the backing inode numbers */
  fc->kernel_cache = 1;  /* keep cached pages across opens, as NFS does */
  fc->entry_timeout = 3600;
  fc->attr_timeout = 3600;
  fc->negative_timeout = 3600;
  /* Readahead requests are "background" requests, which the kernel caps at
   * max_background (12 by default): raise the cap so that the in-flight
   * semaphore here is the bound. */
  conn->max_background = cfg.max_background;
  conn->congestion_threshold = cfg.max_background * 3 / 4;
  return NULL;
}

static int netfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
  (void)fi;
  atomic_fetch_add(&stats.getattrs, 1);
  if (is_stats(path)) {
    memset(st, 0, sizeof(*st));
    st->st_mode = S_IFREG | 0444;
    st->st_nlink = 1;
    st->st_size = 0;
    return 0;
  }
  char full[PATH_MAX];
  int rc = backing_path(path, full);
  if (rc) return rc;
  return lstat(full, st) == 0 ? 0 : -errno;
}

static int netfs_readlink(const char *path, char *buf, size_t size) {
  char full[PATH_MAX];
  int rc = backing_path(path, full);
  if (rc) return rc;
  ssize_t n = readlink(full, buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}

static int netfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t offset,
                         struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
  (void)offset;
  (void)fi;
  (void)flags;
  atomic_fetch_add(&stats.readdirs, 1);
  char full[PATH_MAX];
  int rc = backing_path(path, full);
  if (rc) return rc;
  DIR *dir = opendir(full);
  if (!dir) return -errno;
  struct dirent *e;
  while ((e = readdir(dir)) != NULL) {
    struct stat st = {0};
    st.st_ino = e->d_ino;
    st.st_mode = (mode_t)(DTTOIF(e->d_type));
    if (fill(buf, e->d_name, &st, 0, 0)) break;
  }
  closedir(dir);
  return 0;
}

static int netfs_open(const char *path, struct fuse_file_info *fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  if (is_stats(path)) {
    char *text = malloc(4096);
    if (!text) return -ENOMEM;
    if (stats_json(text, 4096) < 0) {
      free(text);
      return -EOVERFLOW;
    }
    /* The next reader sees the peak from now on. */
    atomic_store(&stats.peak_in_flight, (uint64_t)stats.in_flight);
    fi->fh = (uint64_t)(uintptr_t)text;
    fi->direct_io = 1;
    return 0;
  }
  char full[PATH_MAX];
  int rc = backing_path(path, full);
  if (rc) return rc;
  if (cfg.open_latency_ns) sleep_until(now_ns() + cfg.open_latency_ns);
  int fd = open(full, O_RDONLY);
  if (fd < 0) return -errno;
  atomic_fetch_add(&stats.opens, 1);
  fi->fh = (uint64_t)fd;
  fi->keep_cache = 1;
  return 0;
}

static void count_size(size_t size) {
  int b = 0;
  while (b < SIZE_BUCKETS - 1 && size > ((size_t)4096 << b)) ++b;
  atomic_fetch_add(&stats.sizes[b], 1);
}

static void raise_max(atomic_uint_fast64_t *max, uint64_t v) {
  uint64_t seen = *max;
  while (v > seen && !atomic_compare_exchange_weak(max, &seen, v)) {
  }
}

static int netfs_read(const char *path, char *buf, size_t size, off_t offset,
                      struct fuse_file_info *fi) {
  if (is_stats(path)) {
    const char *text = (const char *)(uintptr_t)fi->fh;
    size_t len = strlen(text);
    if ((size_t)offset >= len) return 0;
    size_t n = len - (size_t)offset < size ? len - (size_t)offset : size;
    memcpy(buf, text + offset, n);
    return (int)n;
  }
  uint64_t arrived = now_ns();
  while (sem_wait(&slots) != 0 && errno == EINTR) {
  }
  uint64_t admitted = now_ns();
  uint64_t now_in_flight = atomic_fetch_add(&stats.in_flight, 1) + 1;
  raise_max(&stats.max_in_flight, now_in_flight);
  raise_max(&stats.peak_in_flight, now_in_flight);
  sleep_until(admitted + cfg.latency_ns);

  const int injected = injected_failure(offset, size);
  ssize_t n = injected ? -1 : pread((int)fi->fh, buf, size, offset);
  int err = injected ? EIO : n < 0 ? errno : 0;

  if (n > 0 && cfg.bandwidth > 0) {
    pthread_mutex_lock(&link_lock);
    uint64_t t = now_ns();
    uint64_t begin = link_free_ns > t ? link_free_ns : t;
    link_free_ns = begin + (uint64_t)((double)n * 1e9 / cfg.bandwidth);
    uint64_t done = link_free_ns;
    pthread_mutex_unlock(&link_lock);
    atomic_fetch_add(&stats.link_wait_ns, done - t);
    sleep_until(done);
  }

  atomic_fetch_sub(&stats.in_flight, 1);
  sem_post(&slots);
  uint64_t finished = now_ns();
  atomic_fetch_add(&stats.slot_wait_ns, admitted - arrived);
  atomic_fetch_add(&stats.busy_ns, finished - admitted);
  atomic_fetch_add(&stats.reads, 1);
  atomic_fetch_add(&stats.asked_bytes, size);
  count_size(size);
  if (err) {
    atomic_fetch_add(&stats.read_errors, 1);
    return -err;
  }
  atomic_fetch_add(&stats.read_bytes, (uint64_t)n);
  return (int)n;
}

static int netfs_flush(const char *path, struct fuse_file_info *fi) {
  (void)path;
  (void)fi;
  return 0;
}

static int netfs_release(const char *path, struct fuse_file_info *fi) {
  if (is_stats(path)) {
    free((void *)(uintptr_t)fi->fh);
  } else {
    close((int)fi->fh);
  }
  return 0;
}

static int netfs_statfs(const char *path, struct statvfs *st) {
  (void)path;
  return statvfs(cfg.backing, st) == 0 ? 0 : -errno;
}

static const struct fuse_operations netfs_ops = {
    .init = netfs_init,
    .getattr = netfs_getattr,
    .readlink = netfs_readlink,
    .readdir = netfs_readdir,
    .open = netfs_open,
    .read = netfs_read,
    .flush = netfs_flush,
    .release = netfs_release,
    .statfs = netfs_statfs,
};

#define OPT(t, field) {t, offsetof(struct options, field), 1}
static const struct fuse_opt netfs_opts[] = {
    OPT("--latency-ms=%s", latency_ms),
    OPT("--open-latency-ms=%s", open_latency_ms),
    OPT("--in-flight=%s", in_flight),
    OPT("--bandwidth=%s", bandwidth),
    OPT("--max-background=%s", max_background),
    OPT("--threads=%s", threads),
    OPT("--fail-control=%s", fail_control),
    FUSE_OPT_END,
};

static int positional;

static int keep_fuse_options(void *data, const char *arg, int key, struct fuse_args *out) {
  (void)data;
  (void)out;
  if (key != FUSE_OPT_KEY_NONOPT) return 1; /* a FUSE option: fuse_new checks it */
  if (positional == 0) {
    if (!realpath(arg, cfg.backing)) {
      fprintf(stderr, "netfs: backing directory %s: %s\n", arg, strerror(errno));
      return -1;
    }
  } else if (positional == 1) {
    cfg.mountpoint = strdup(arg);
  } else {
    fprintf(stderr, "netfs: unexpected argument %s\n", arg);
    return -1;
  }
  ++positional;
  return 0;
}

/* A number >= minimum from an option's text, or the default when absent. */
static int parse_number(const char *name, const char *text, double fallback, double minimum,
                        double *out) {
  if (!text) {
    *out = fallback;
    return 0;
  }
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end || v < minimum) {
    fprintf(stderr, "netfs: --%s=%s: expected a number >= %g\n", name, text, minimum);
    return -1;
  }
  *out = v;
  return 0;
}

int main(int argc, char *argv[]) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  struct options o = {0};
  if (fuse_opt_parse(&args, &o, netfs_opts, keep_fuse_options) != 0) return 2;
  if (positional != 2) {
    fprintf(stderr,
            "usage: %s BACKING MOUNTPOINT [--latency-ms=1] [--in-flight=32] "
            "[--bandwidth=BYTES_PER_S] [--open-latency-ms=0] [--max-background=N] "
            "[--threads=N] [--fail-control=PATH] [-o FUSE_OPTION,...]\n",
            argv[0]);
    return 2;
  }
  double latency, open_latency, in_flight, bandwidth, background, threads;
  if (parse_number("latency-ms", o.latency_ms, 1, 0, &latency) ||
      parse_number("open-latency-ms", o.open_latency_ms, 0, 0, &open_latency) ||
      parse_number("in-flight", o.in_flight, 32, 1, &in_flight) ||
      parse_number("bandwidth", o.bandwidth, 0, 0, &bandwidth) ||
      parse_number("max-background", o.max_background, 0, 0, &background) ||
      parse_number("threads", o.threads, 0, 0, &threads)) {
    return 2;
  }
  cfg.fail_control = o.fail_control;
  cfg.latency_ns = (uint64_t)(latency * 1e6);
  cfg.open_latency_ns = (uint64_t)(open_latency * 1e6);
  cfg.in_flight = (unsigned)in_flight;
  cfg.bandwidth = bandwidth;
  /* Defaults: room in the kernel's queue and in the thread pool for every
   * request in flight plus as many waiting, and threads to spare for opens
   * and getattrs while every slot is taken. */
  cfg.max_background = background > 0 ? (unsigned)background : 2 * cfg.in_flight + 16;
  cfg.threads = threads > 0 ? (unsigned)threads : 2 * cfg.in_flight + 16;
  start_ns = now_ns();
  if (sem_init(&slots, 0, cfg.in_flight) != 0) {
    perror("netfs: sem_init");
    return 1;
  }

  fuse_opt_add_arg(&args, "-o");
  char mount_opts[PATH_MAX + 64];
  snprintf(mount_opts, sizeof(mount_opts), "ro,fsname=netfs:%s,subtype=netfs", cfg.backing);
  fuse_opt_add_arg(&args, mount_opts);

  struct fuse *fuse = fuse_new(&args, &netfs_ops, sizeof(netfs_ops), NULL);
  if (!fuse) return 1;
  int rc = 1;
  if (fuse_mount(fuse, cfg.mountpoint) == 0) {
    struct fuse_session *se = fuse_get_session(fuse);
    if (fuse_set_signal_handlers(se) == 0) {
      struct fuse_loop_config *loop = fuse_loop_cfg_create();
      fuse_loop_cfg_set_max_threads(loop, cfg.threads);
      fuse_loop_cfg_set_idle_threads(loop, cfg.threads);
      rc = fuse_loop_mt(fuse, loop) ? 1 : 0;
      fuse_loop_cfg_destroy(loop);
      fuse_remove_signal_handlers(se);
    }
    fuse_unmount(fuse);
  }
  fuse_destroy(fuse);
  char text[4096];
  if (stats_json(text, sizeof(text)) > 0) fprintf(stderr, "netfs stats: %s", text);
  fuse_opt_free_args(&args);
  free(o.latency_ms);
  free(o.open_latency_ms);
  free(o.in_flight);
  free(o.bandwidth);
  free(o.max_background);
  free(o.threads);
  free(cfg.mountpoint);
  return rc;
}
