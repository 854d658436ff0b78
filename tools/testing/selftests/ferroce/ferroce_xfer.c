// SPDX-License-Identifier: GPL-2.0
/*
 * ferroce_xfer: moves messages between two RDMA devices and checks every byte.
 *
 * rdma-core's pingpong "-c" looks at one byte per page and still exits 0 on a mismatch; this
 * tool fills each message with a pattern of its own (a function of a seed, the message number
 * and the byte offset), checks every byte on the other side, and checks that nothing was
 * written past the end of a receive. It exits non-zero on any mismatch, lost message (unless
 * --allow-loss) or error.
 *
 *   server: ferroce_xfer -d DEV -g GID [options]
 *   client: ferroce_xfer -d DEV -g GID [options] SERVER_ADDR
 *
 * The server is the target: it receives SENDs and WRITEs, and is read from by READs.
 * Options: -t rc|uc|ud, -o send|write|read, -s SIZE[,SIZE...] (cycled), -n MESSAGES,
 * -w WINDOW (messages per batch), -m MTU (256..4096), -p TCP_PORT, --seed N,
 * --corrupt N (the side that produces message N spoils one of its bytes: the check must fail),
 * --allow-loss (UC/UD: lost messages are counted, not failed; delivered ones are still checked),
 * --timeout SECONDS (per batch), --ack-timeout CODE (the RC QP's local ACK timeout, IBA's
 * 4.096 us << CODE; default 14, 67 ms), --start-on FILE (with the QP ready, start the transfer
 * once FILE exists), --hold FILE (after the transfer and its report, keep the QP until FILE
 * exists): a test sets up and reads counters around a transfer while its QPs are there. Each
 * waits 120 s at most. --rate-limit KBPS[,KBPS2]: the QP's IB_QP_RATE_LIMIT once it is ready to
 * send, and KBPS2 from the second half of the batches on (librxe has no
 * ibv_modify_qp_rate_limit, so it goes as the kernel's extended MODIFY_QP command, written to
 * the context's command file; an error is printed and exits 3). --mark SECONDS: the receiver
 * also prints the bytes delivered within the transfer's first SECONDS (a window shared by
 * transfers that start together).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/ib_user_verbs.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define GRH_LEN 40
#define CANARY_LEN 64
#define CANARY 0xa5
#define UD_QKEY 0x11111111
#define MAX_SIZES 16

enum transport { RC, UC, UD };
enum op { OP_SEND, OP_WRITE, OP_READ };

static struct {
	const char *dev, *server, *start_on, *hold;
	int gid_index, port, mtu, timeout, ack_timeout;
	enum transport tp;
	enum op op;
	uint32_t sizes[MAX_SIZES];
	int nsizes;
	long messages, corrupt;
	int window;
	uint64_t seed;
	bool allow_loss;
	long rate_limit, rate_limit2;
	double mark;
} opt = {
	.port = 18600, .mtu = 1024, .timeout = 60, .ack_timeout = 14, .tp = RC, .op = OP_SEND,
	.sizes = { 4096 }, .nsizes = 1, .messages = 100, .corrupt = -1, .window = 16,
	.seed = 0x5eed, .rate_limit = -1, .rate_limit2 = -1,
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "ferroce_xfer: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* splitmix64: each 8 bytes of a message come from one mix of (seed, message, offset / 8). */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint8_t pattern_byte(long msg, size_t off)
{
	uint64_t h = mix(opt.seed ^ ((uint64_t)msg << 32) ^ (off / 8));

	return h >> (8 * (off % 8));
}

static uint32_t msg_size(long msg)
{
	return opt.sizes[msg % opt.nsizes];
}

static void fill(uint8_t *buf, long msg)
{
	uint32_t len = msg_size(msg);

	for (size_t o = 0; o < len; o++)
		buf[o] = pattern_byte(msg, o);
	if (msg == opt.corrupt && len)
		buf[len / 2] ^= 0x40;
}

static long mismatches;

/* Checks message `msg` at `buf` and the canary after it; reports the first bad byte. */
static bool check(const uint8_t *buf, long msg, uint32_t got_len, bool canary)
{
	uint32_t len = msg_size(msg);

	if (got_len != len) {
		fprintf(stderr, "ferroce_xfer: message %ld: length %u, want %u\n", msg, got_len, len);
		mismatches++;
		return false;
	}
	for (size_t o = 0; o < len; o++) {
		if (buf[o] != pattern_byte(msg, o)) {
			fprintf(stderr, "ferroce_xfer: data mismatch in message %ld at offset %zu of %u: "
				"got 0x%02x, want 0x%02x\n", msg, o, len, buf[o], pattern_byte(msg, o));
			mismatches++;
			return false;
		}
	}
	for (size_t o = 0; canary && o < CANARY_LEN; o++) {
		if (buf[len + o] != CANARY) {
			fprintf(stderr, "ferroce_xfer: message %ld: byte %zu past its end was written\n",
				msg, o);
			mismatches++;
			return false;
		}
	}
	return true;
}

/* What each side tells the other over TCP before any RDMA traffic. */
struct info {
	uint32_t qpn, psn, rkey, slot;
	uint64_t addr, seed;
	uint8_t gid[16];
} __attribute__((packed));

static int tcp_connect(void)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *r;
	char port[16];
	int fd = -1;

	snprintf(port, sizeof(port), "%d", opt.port);
	if (opt.server) {
		if (getaddrinfo(opt.server, port, &hints, &res))
			die("cannot resolve %s", opt.server);
		/* The server may not listen yet: retry for a while. */
		for (int i = 0; i < 300 && fd < 0; i++) {
			for (r = res; r; r = r->ai_next) {
				fd = socket(r->ai_family, r->ai_socktype, 0);
				if (fd >= 0 && !connect(fd, r->ai_addr, r->ai_addrlen))
					break;
				if (fd >= 0)
					close(fd);
				fd = -1;
			}
			if (fd < 0)
				usleep(100000);
		}
		freeaddrinfo(res);
		if (fd < 0)
			die("cannot connect to %s:%d", opt.server, opt.port);
	} else {
		int one = 1, lfd;

		hints.ai_flags = AI_PASSIVE;
		hints.ai_family = AF_INET6;
		if (getaddrinfo(NULL, port, &hints, &res))
			die("getaddrinfo");
		lfd = socket(res->ai_family, res->ai_socktype, 0);
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd < 0 || bind(lfd, res->ai_addr, res->ai_addrlen) || listen(lfd, 1))
			die("cannot listen on port %d: %s", opt.port, strerror(errno));
		freeaddrinfo(res);
		fd = accept(lfd, NULL, NULL);
		close(lfd);
		if (fd < 0)
			die("accept: %s", strerror(errno));
	}
	return fd;
}

static void xread(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, (char *)buf + done, len - done);

		if (n <= 0)
			die("the peer went away");
		done += n;
	}
}

static void xwrite(int fd, const void *buf, size_t len)
{
	if (write(fd, buf, len) != (ssize_t)len)
		die("cannot write to the peer");
}

/* One byte over TCP: the sides step through batches together. */
static void tell(int fd, char c)
{
	xwrite(fd, &c, 1);
}

static void await(int fd, char want)
{
	char c;

	xread(fd, &c, 1);
	if (c != want)
		die("protocol: got '%c', want '%c'", c, want);
}

struct ctx {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	uint8_t *buf;
	size_t slot;
	struct info self, peer;
	int fd;
	int outstanding_events;
};

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *c = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			c = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!c)
		die("no device %s", name);
	return c;
}

static enum ibv_mtu ib_mtu(int bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	}
	die("bad MTU %d", bytes);
	return 0;
}

static void setup(struct ctx *c)
{
	uint32_t max = 0;
	int depth = opt.window * 2 + 4;

	for (int i = 0; i < opt.nsizes; i++)
		max = opt.sizes[i] > max ? opt.sizes[i] : max;
	c->slot = GRH_LEN + max + CANARY_LEN;
	c->ctx = open_dev(opt.dev);
	c->pd = ibv_alloc_pd(c->ctx);
	c->ch = ibv_create_comp_channel(c->ctx);
	if (!c->pd || !c->ch)
		die("cannot allocate a PD or channel");
	c->cq = ibv_create_cq(c->ctx, depth * 2, NULL, c->ch, 0);
	if (!c->cq)
		die("cannot create a CQ");
	if (posix_memalign((void **)&c->buf, 4096, c->slot * opt.window))
		die("no memory");
	memset(c->buf, CANARY, c->slot * opt.window);
	c->mr = ibv_reg_mr(c->pd, c->buf, c->slot * opt.window, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!c->mr)
		die("cannot register memory: %s", strerror(errno));
	struct ibv_qp_init_attr ia = {
		.send_cq = c->cq, .recv_cq = c->cq,
		.cap = { .max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = opt.tp == RC ? IBV_QPT_RC : opt.tp == UC ? IBV_QPT_UC : IBV_QPT_UD,
	};
	c->qp = ibv_create_qp(c->pd, &ia);
	if (!c->qp)
		die("cannot create a QP: %s", strerror(errno));
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ };
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (opt.tp == UD) {
		a.qkey = UD_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(c->qp, &a, mask))
		die("INIT: %s", strerror(errno));
	union ibv_gid gid;

	if (ibv_query_gid(c->ctx, 1, opt.gid_index, &gid))
		die("no GID %d", opt.gid_index);
	srand48(getpid() ^ (long)now());
	c->self = (struct info){
		.qpn = c->qp->qp_num, .psn = lrand48() & 0xffffff, .rkey = c->mr->rkey,
		.slot = c->slot, .addr = (uintptr_t)c->buf, .seed = opt.seed,
	};
	memcpy(c->self.gid, gid.raw, 16);
}

/* IB_QP_RATE_LIMIT through the uverbs write interface: the extended MODIFY_QP command. */
static void set_rate_limit(struct ibv_qp *qp, uint32_t kbps)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_ex_cmd_hdr ex;
		struct ib_uverbs_ex_modify_qp cmd;
	} req = { 0 };
	struct ib_uverbs_ex_modify_qp_resp resp = { 0 };

	req.hdr.command = IB_USER_VERBS_CMD_FLAG_EXTENDED | IB_USER_VERBS_EX_CMD_MODIFY_QP;
	req.hdr.in_words = sizeof(req.cmd) / 8;
	req.hdr.out_words = sizeof(resp) / 8;
	req.ex.response = (uintptr_t)&resp;
	req.cmd.base.qp_handle = qp->handle;
	req.cmd.base.attr_mask = IBV_QP_RATE_LIMIT;
	req.cmd.rate_limit = kbps;
	if (write(qp->context->cmd_fd, &req, sizeof(req)) != sizeof(req)) {
		fprintf(stderr, "ferroce_xfer: rate limit %u kb/s: %s\n", kbps, strerror(errno));
		exit(3);
	}
}

static void connect_qp(struct ctx *c)
{
	struct ibv_ah_attr ah = {
		.is_global = 1, .port_num = 1,
		.grh = { .hop_limit = 64, .sgid_index = opt.gid_index },
	};

	memcpy(ah.grh.dgid.raw, c->peer.gid, 16);
	if (opt.tp == UD) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };

		if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE))
			die("RTR: %s", strerror(errno));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = c->self.psn;
		if (ibv_modify_qp(c->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
			die("RTS: %s", strerror(errno));
		if (opt.rate_limit >= 0)
			set_rate_limit(c->qp, opt.rate_limit);
		c->ah = ibv_create_ah(c->pd, &ah);
		if (!c->ah)
			die("cannot create an AH: %s", strerror(errno));
		return;
	}
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = ib_mtu(opt.mtu), .dest_qp_num = c->peer.qpn,
		.rq_psn = c->peer.psn, .ah_attr = ah, .max_dest_rd_atomic = 16, .min_rnr_timer = 12,
	};
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	if (opt.tp == RC)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	if (ibv_modify_qp(c->qp, &a, mask))
		die("RTR: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = c->self.psn;
	a.timeout = opt.ack_timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 16;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (opt.tp == RC)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(c->qp, &a, mask))
		die("RTS: %s", strerror(errno));
	if (opt.rate_limit >= 0)
		set_rate_limit(c->qp, opt.rate_limit);
}

/*
 * Waits up to `deadline` for completions; returns how many it took, 0 on timeout, or -1 once
 * `fd` (if not -1) has something to read.
 */
static int wait_wc(struct ctx *c, struct ibv_wc *wc, int max, double deadline, int fd)
{
	for (;;) {
		int n = ibv_poll_cq(c->cq, max, wc);

		if (n < 0)
			die("poll_cq failed");
		if (n > 0)
			return n;
		if (ibv_req_notify_cq(c->cq, 0))
			die("req_notify_cq failed");
		n = ibv_poll_cq(c->cq, max, wc);
		if (n)
			return n;
		double left = deadline - now();

		if (left <= 0)
			return 0;
		struct pollfd p[2] = { { .fd = c->ch->fd, .events = POLLIN },
				       { .fd = fd, .events = POLLIN } };

		if (poll(p, fd >= 0 ? 2 : 1, (int)(left * 1000) + 1) > 0) {
			struct ibv_cq *cq;
			void *cctx;

			if ((p[0].revents & POLLIN) && !ibv_get_cq_event(c->ch, &cq, &cctx))
				c->outstanding_events++;
			if (fd >= 0 && (p[1].revents & (POLLIN | POLLHUP)))
				return -1;
		}
	}
}

static void status_ok(const struct ibv_wc *wc, const char *what)
{
	if (wc->status != IBV_WC_SUCCESS)
		die("%s completion %lu failed: %s (%d)", what, (unsigned long)wc->wr_id,
		    ibv_wc_status_str(wc->status), wc->status);
}

static uint8_t *slot_of(struct ctx *c, long i)
{
	return c->buf + c->slot * (i % opt.window);
}

/*
 * Posts receive `i`. A SEND lands in slot i, cleared to the canary first; a WRITE with
 * immediate needs a receive but no buffer (its data goes to the region, which the receive
 * must not clobber).
 */
static void repost(struct ctx *c, long i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot_of(c, i), .length = c->slot, .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i % opt.window, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (opt.op == OP_WRITE)
		wr.num_sge = 0;
	else
		memset(slot_of(c, i), CANARY, c->slot);
	if (ibv_post_recv(c->qp, &wr, &bad))
		die("post_recv: %s", strerror(errno));
}

/* A receive completed: a WRITE's receive goes back at once, a SEND's after its check. */
static void post_recv(struct ctx *c, long i)
{
	if (opt.op == OP_WRITE)
		repost(c, i);
}

/* The initiator's side of message `m` (a SEND or WRITE from slot m, or a READ into it). */
static void post_op(struct ctx *c, long m)
{
	uint8_t *local = slot_of(c, m) + (opt.tp == UD ? GRH_LEN : 0);
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = msg_size(m), .lkey = c->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = m, .sg_list = &sge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	switch (opt.op) {
	case OP_SEND:
		fill(local, m);
		wr.opcode = IBV_WR_SEND_WITH_IMM;
		wr.imm_data = htonl(m);
		break;
	case OP_WRITE:
		fill(local, m);
		/* UC may lose any one of them: each carries its number. RC writes in order, so only
		 * the last of a batch needs one.
		 */
		wr.opcode = (opt.tp == UC || (m + 1) % opt.window == 0 || m + 1 == opt.messages) ?
			    IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
		wr.imm_data = htonl(m);
		wr.wr.rdma.remote_addr = c->peer.addr + c->peer.slot * (m % opt.window);
		wr.wr.rdma.rkey = c->peer.rkey;
		break;
	case OP_READ:
		memset(local, CANARY, msg_size(m) + CANARY_LEN);
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = c->peer.addr + c->peer.slot * (m % opt.window);
		wr.wr.rdma.rkey = c->peer.rkey;
		break;
	}
	if (opt.tp == UD) {
		wr.wr.ud.ah = c->ah;
		wr.wr.ud.remote_qpn = c->peer.qpn;
		wr.wr.ud.remote_qkey = UD_QKEY;
	}
	if (ibv_post_send(c->qp, &wr, &bad))
		die("post_send: %s", strerror(errno));
}

static long delivered, lost;
static uint64_t bytes;
/* When the last message was delivered (checked): the receiver's measure of a transfer. */
static double last_delivery;
/* When the transfer started, and (--mark) the bytes delivered within its first opt.mark s. */
static double t0;
static uint64_t bytes_by_mark;

/* A message of LEN bytes was delivered and checked. */
static void deliver(uint64_t len)
{
	delivered++;
	bytes += len;
	last_delivery = now();
	if (opt.mark > 0 && last_delivery - t0 <= opt.mark)
		bytes_by_mark = bytes;
}

/* Initiator: posts a batch, waits for its send completions. READs are checked here. */
static void client_batch(struct ctx *c, long first, long n, double deadline)
{
	struct ibv_wc wc[16];
	long done = 0;

	for (long m = first; m < first + n; m++)
		post_op(c, m);
	while (done < n) {
		int k = wait_wc(c, wc, 16, deadline, -1);

		if (!k)
			die("timed out waiting for %ld send completions of batch %ld", n - done, first);
		for (int i = 0; i < k; i++) {
			status_ok(&wc[i], "send");
			done++;
			if (opt.op == OP_READ && check(slot_of(c, wc[i].wr_id), wc[i].wr_id,
						       msg_size(wc[i].wr_id), true)) {
				deliver(msg_size(wc[i].wr_id));
			}
		}
	}
}

/*
 * Target: takes what a batch delivered, checks it, reposts the receives. On UC and UD a lost
 * message never completes: once the client says the batch is out ('D'), stragglers get half
 * a second.
 */
static void server_batch(struct ctx *c, long first, long n, double deadline)
{
	struct ibv_wc wc[16];
	long got = 0;
	bool client_done = opt.tp == RC;

	while (got < n) {
		int k = wait_wc(c, wc, 16, deadline, client_done ? -1 : c->fd);

		if (k < 0) {
			await(c->fd, 'D');
			client_done = true;
			if (deadline > now() + 0.5)
				deadline = now() + 0.5;
			continue;
		}
		if (!k) {
			if (opt.tp == RC)
				die("timed out with %ld of batch %ld missing", n - got, first);
			if (!client_done)
				die("timed out waiting for the client's batch %ld", first);
			break;
		}
		for (int i = 0; i < k; i++) {
			status_ok(&wc[i], "receive");
			if (!(wc[i].wc_flags & IBV_WC_WITH_IMM))
				die("a completion without immediate data");
			long m = ntohl(wc[i].imm_data);
			uint8_t *at = slot_of(c, wc[i].wr_id);
			uint32_t len = wc[i].byte_len;

			post_recv(c, wc[i].wr_id);
			if (m < first || m >= first + n) {
				fprintf(stderr, "ferroce_xfer: message %ld arrived in batch %ld\n", m, first);
				mismatches++;
				continue;
			}
			if (opt.op == OP_WRITE) {
				/* The receive only carries the number: the data is in the region. An RC
				 * batch ends with the one WRITE with immediate: all of it landed.
				 */
				long from = opt.tp == RC ? first : m;

				for (long w = from; w <= m; w++) {
					if (check(slot_of(c, w), w, msg_size(w), true)) {
						deliver(msg_size(w));
					}
				}
				got += m - from + 1;
				continue;
			}
			if (opt.tp == UD) {
				at += GRH_LEN;
				len -= GRH_LEN;
			}
			if (check(at, m, len, true)) {
				deliver(len);
			}
			got++;
			/* The slot is checked: only now may it take another message. */
			repost(c, wc[i].wr_id);
		}
	}
	if (!client_done)
		await(c->fd, 'D');
	lost += n - got;
}

/* Waits (120 s at most) until PATH, if given, exists; false if it never did. */
static bool wait_for(const char *path)
{
	for (int i = 0; path && access(path, F_OK); i++) {
		if (i == 2400)
			return false;
		usleep(50000);
	}
	return true;
}

static void usage(void)
{
	die("usage: ferroce_xfer -d DEV -g GID_INDEX [-t rc|uc|ud] [-o send|write|read] "
	    "[-s SIZE[,SIZE..]] [-n MESSAGES] [-w WINDOW] [-m MTU] [-p PORT] [--seed N] "
	    "[--corrupt N] [--allow-loss] [--timeout S] [--ack-timeout CODE] [--start-on FILE] "
	    "[--hold FILE] [--rate-limit KBPS[,KBPS2]] [--mark SECONDS] [SERVER]");
}

static void parse(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "seed", 1, NULL, 'S' }, { "corrupt", 1, NULL, 'C' },
		{ "allow-loss", 0, NULL, 'L' }, { "timeout", 1, NULL, 'T' },
		{ "ack-timeout", 1, NULL, 'A' }, { "start-on", 1, NULL, 'W' },
		{ "hold", 1, NULL, 'H' }, { "rate-limit", 1, NULL, 'R' },
		{ "mark", 1, NULL, 'M' }, { 0 },
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "d:g:t:o:s:n:w:m:p:", lo, NULL)) != -1) {
		switch (ch) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gid_index = atoi(optarg); break;
		case 't':
			opt.tp = !strcmp(optarg, "rc") ? RC : !strcmp(optarg, "uc") ? UC :
				 !strcmp(optarg, "ud") ? UD : (usage(), RC);
			break;
		case 'o':
			opt.op = !strcmp(optarg, "send") ? OP_SEND : !strcmp(optarg, "write") ?
				 OP_WRITE : !strcmp(optarg, "read") ? OP_READ : (usage(), OP_SEND);
			break;
		case 's':
			opt.nsizes = 0;
			for (char *s = strtok(optarg, ","); s && opt.nsizes < MAX_SIZES;
			     s = strtok(NULL, ","))
				opt.sizes[opt.nsizes++] = strtoul(s, NULL, 0);
			break;
		case 'n': opt.messages = atol(optarg); break;
		case 'w': opt.window = atoi(optarg); break;
		case 'm': opt.mtu = atoi(optarg); break;
		case 'p': opt.port = atoi(optarg); break;
		case 'S': opt.seed = strtoull(optarg, NULL, 0); break;
		case 'C': opt.corrupt = atol(optarg); break;
		case 'L': opt.allow_loss = true; break;
		case 'T': opt.timeout = atoi(optarg); break;
		case 'A': opt.ack_timeout = atoi(optarg); break;
		case 'W': opt.start_on = optarg; break;
		case 'H': opt.hold = optarg; break;
		case 'M': opt.mark = atof(optarg); break;
		case 'R': {
			char *end;

			opt.rate_limit = strtol(optarg, &end, 0);
			if (*end == ',')
				opt.rate_limit2 = strtol(end + 1, NULL, 0);
			break;
		}
		default: usage();
		}
	}
	if (optind < argc)
		opt.server = argv[optind];
	if (!opt.dev || opt.nsizes == 0 || opt.messages <= 0 || opt.window <= 0 ||
	    opt.window > 4096)
		usage();
	if ((opt.tp == UD && opt.op != OP_SEND) || (opt.tp == UC && opt.op == OP_READ))
		die("that operation is not on that transport");
	for (int i = 0; i < opt.nsizes; i++)
		if (opt.tp == UD && opt.sizes[i] > (uint32_t)opt.mtu)
			die("a UD message is at most one MTU");
}

int main(int argc, char **argv)
{
	struct ctx c = { 0 };
	/* Which side produces the data, so the READ target fills and the others post. */
	bool initiator;

	parse(argc, argv);
	setup(&c);
	c.fd = tcp_connect();
	xwrite(c.fd, &c.self, sizeof(c.self));
	xread(c.fd, &c.peer, sizeof(c.peer));
	if (opt.server)
		opt.seed = c.peer.seed;
	connect_qp(&c);
	initiator = opt.server != NULL;
	/* Receives first (SEND and WRITE with immediate both take one), then say ready. */
	if (!initiator && opt.op != OP_READ)
		for (long i = 0; i < opt.window; i++)
			repost(&c, i);
	if (!wait_for(opt.start_on))
		die("%s did not appear within 120 s", opt.start_on);
	tell(c.fd, 'R');
	await(c.fd, 'R');

	t0 = now();
	for (long first = 0; first < opt.messages; first += opt.window) {
		long n = opt.messages - first < opt.window ? opt.messages - first : opt.window;
		double deadline = now() + opt.timeout;

		if (initiator) {
			if (opt.rate_limit2 >= 0 && first == opt.messages / opt.window / 2 * opt.window)
				set_rate_limit(c.qp, opt.rate_limit2);
			await(c.fd, 'B');
			client_batch(&c, first, n, deadline);
			if (opt.tp != RC && opt.op != OP_READ)
				tell(c.fd, 'D');
		} else {
			/* The READ source, or the WRITE target cleared to the canary. */
			for (long m = first; m < first + n; m++) {
				if (opt.op == OP_READ)
					fill(slot_of(&c, m), m);
				else if (opt.op == OP_WRITE)
					memset(slot_of(&c, m), CANARY, c.slot);
			}
			tell(c.fd, 'B');
			if (opt.op != OP_READ)
				server_batch(&c, first, n, deadline);
		}
		/* Both sides finish a batch before the next starts: slots are reused. */
		tell(c.fd, 'E');
		await(c.fd, 'E');
	}
	double secs = now() - t0;
	bool counts = opt.op == OP_READ ? initiator : !initiator;

	if (counts) {
		printf("ferroce_xfer: %s %s, %ld messages: %ld byte-exact (%llu bytes), %ld lost, "
		       "%ld bad, %.2f s, the last delivered at %.3f s\n",
		       opt.tp == RC ? "rc" : opt.tp == UC ? "uc" : "ud",
		       opt.op == OP_SEND ? "send" : opt.op == OP_WRITE ? "write" : "read",
		       opt.messages, delivered, (unsigned long long)bytes, lost, mismatches, secs,
		       delivered ? last_delivery - t0 : 0);
		if (opt.mark > 0)
			printf("ferroce_xfer: %llu bytes delivered within the first %.3f s\n",
			       (unsigned long long)bytes_by_mark, opt.mark);
	} else {
		printf("ferroce_xfer: sent %ld messages in %.2f s\n", opt.messages, secs);
	}
	fflush(stdout);
	wait_for(opt.hold);
	if (c.outstanding_events)
		ibv_ack_cq_events(c.cq, c.outstanding_events);
	if (mismatches)
		return 1;
	if (counts && lost && !opt.allow_loss)
		return 1;
	if (counts && delivered == 0)
		return 1;
	return 0;
}
