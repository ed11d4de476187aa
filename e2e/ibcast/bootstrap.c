/*
 * e2e/ibcast/bootstrap.c: ibcast_e2e's peer exchange over TCP: the links (one connection a
 * peer), each side's QP numbers, PSNs, GID, LID and FIFO address traded per channel, the QPs
 * connected to what the peer sent (or to this process's own comms on a single host), and
 * the barriers around the traffic. Separate because it is the out-of-band part.
 */
#include "ibcast.h"

Link links[MAX_LINKS];
int nlinks;

struct PeerInfo {
    uint8_t gid[16];
    uint32_t tag, nch, lid;
    struct { int32_t id; struct CommInfo send, recv; } ch[MAX_CH];
};

static void comm_info(Comm *c, struct CommInfo *ci) {
    memset(ci, 0, sizeof *ci);
    ci->ndata = (uint32_t)c->ndata;
    for (int q = 0; q < c->ndata; q++) ci->data[q] = (struct QpInfo){c->data[q].qp->qp_num, psn_of(c->data[q].qp->qp_num)};
    ci->cts = (struct QpInfo){c->cts.qp->qp_num, psn_of(c->cts.qp->qp_num)};
    if (c->is_send) { ci->fifo_addr = (uintptr_t)c->fifo; ci->fifo_rkey = c->fifo_mr->rkey; }
}

static void xfer(int fd, void *p, size_t n, int wr) {
    uint8_t *b = p;
    while (n) {
        ssize_t k = wr ? write(fd, b, n) : read(fd, b, n);
        if (k <= 0) die("bootstrap socket %s: %s", wr ? "write" : "read", k == 0 ? "peer closed" : strerror(errno));
        b += k; n -= (size_t)k;
    }
}

int bootstrap_connect(const char *peer, int port, int listen_side) {
    int fd;
    if (listen_side) {
        int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
        if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1)) die("bootstrap listen on %d: %s", port, strerror(errno));
        fd = accept(ls, NULL, NULL);
        if (fd < 0) die("accept: %s", strerror(errno));
        close(ls);
    } else {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, peer, &a.sin_addr) != 1) die("bad peer address %s", peer);
        uint64_t t0 = now_ms();
        for (;;) {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
            close(fd);
            if (now_ms() - t0 > 60000) die("cannot reach %s:%d: %s", peer, port, strerror(errno));
            usleep(100000);
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

void all_barrier(void) {
    for (int l = 0; l < nlinks; l++) {
        char b = 'b';
        if (links[l].fd >= 0) xfer(links[l].fd, &b, 1, 1);
    }
    for (int l = 0; l < nlinks; l++) {
        char b;
        if (links[l].fd >= 0) xfer(links[l].fd, &b, 1, 0);
    }
}

/* Every link's exchange and connection; returns the (last) peer's tag. */
uint32_t exchange_and_connect(void) {
    uint32_t peer_tag = 0;
    for (int l = 0; l < nlinks; l++) {
        Link *lk = &links[l];
        struct PeerInfo mine, theirs;
        memset(&mine, 0, sizeof mine);
        memcpy(mine.gid, my_gid.raw, 16);
        mine.tag = my_tag;
        mine.lid = my_lid;
        mine.nch = (uint32_t)lk->nch;
        for (int i = 0; i < lk->nch; i++) {
            Chan *ch = &chans[lk->first + i];
            mine.ch[i].id = ch->id;
            comm_info(&ch->send, &mine.ch[i].send);
            comm_info(&ch->recv, &mine.ch[i].recv);
        }
        if (lk->fd >= 0) {
            xfer(lk->fd, &mine, sizeof mine, 1);
            xfer(lk->fd, &theirs, sizeof theirs, 0);
            if (theirs.nch != mine.nch) die("peer has %u channels, we have %u", theirs.nch, mine.nch);
        } else {
            theirs = mine;   /* single host: the send comm talks to our own recv comm */
        }
        union ibv_gid rgid;
        memcpy(rgid.raw, theirs.gid, 16);
        peer_tag = theirs.tag;
        for (int i = 0; i < lk->nch; i++) {
            Chan *ch = &chans[lk->first + i];
            if (theirs.ch[i].id != ch->id) die("channel order differs from the peer's");
            ch->peer_tag = theirs.tag;
            comm_connect(&ch->send, &theirs.ch[i].recv, &rgid, (uint16_t)theirs.lid);
            comm_connect(&ch->recv, &theirs.ch[i].send, &rgid, (uint16_t)theirs.lid);
            ch->recv.rfifo_addr = theirs.ch[i].send.fifo_addr;
            ch->recv.rfifo_rkey = theirs.ch[i].send.fifo_rkey;
            /* the receive for the peer's closing message, posted before any traffic */
            struct ibv_sge sge = {.addr = (uintptr_t)ch->recv.fin, .length = sizeof(struct Fin), .lkey = ch->recv.fin_mr->lkey};
            if (ch->index_forms) rcclTelemetryWqePosted(DEV, ch->id, ch->recv.cts.slot, 0);
            else rcclTelemetryQpRecvPosted(ch->recv.cts.h);
            post_recv(&ch->recv.cts, mkid(K_FIN, 0, 0), &sge);
        }
    }
    return peer_tag;
}
