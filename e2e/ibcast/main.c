/*
 * e2e/ibcast/main.c: ibcast_e2e's command line and its run: telemetry and device init,
 * the channels and their comms, the exchange with the peers, the proxy loop, the error
 * probe, teardown and the tally. Separate because it is the order of things, where the other
 * files are the things.
 */
#include "ibcast.h"

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ibcast_e2e: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t my_tag;
Chan chans[MAX_CH];
int nchan;

static void usage(void) {
    fprintf(stderr,
            "usage: ibcast_e2e --tally FILE [--dev rxe0] [--gid 1] [--channels 0,3,17] [--reqs 24]\n"
            "                  [--index-channel ID] [--max-size BYTES] [--inflight 1..4] [--error-probe]\n"
            "                  [--timeout 1..31] [--linger-ms MS] [--peer IP --port P [--listen]] [--rank R]\n"
            "                  [--retry-cnt 0..7] [--rnr-retry 0..7] [--expect-errors [--hang-ms MS] [--hang]]\n"
            "                  [--rnr-after N] [--tclass TC [--odd-tclass CH:TC]]\n"
            "                  [--link listen:PORT:CHANNELS | --link IP:PORT:CHANNELS ...]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *tally = NULL, *devname = "rxe0", *peer = NULL, *chlist = "0,3,17";
    int nreq = 24, port = 18515, listen_side = 0, rank = 0, index_ch = -1, linger_ms = 0;
    int hang_ms = 5000, hang = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--listen")) { listen_side = 1; continue; }
        if (!strcmp(a, "--error-probe")) { error_probe = 1; continue; }
        if (!strcmp(a, "--expect-errors")) { expect_errors = 1; continue; }
        if (!strcmp(a, "--hang")) { hang = 1; continue; }
        if (!v) usage();
        if (!strcmp(a, "--tally")) tally = v;
        else if (!strcmp(a, "--dev")) devname = v;
        else if (!strcmp(a, "--gid")) gid_index = atoi(v);
        else if (!strcmp(a, "--channels")) chlist = v;
        else if (!strcmp(a, "--reqs")) nreq = atoi(v);
        else if (!strcmp(a, "--index-channel")) index_ch = atoi(v);
        else if (!strcmp(a, "--peer")) peer = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--rank")) rank = atoi(v);
        else if (!strcmp(a, "--max-size")) max_size = (uint32_t)atoi(v);
        else if (!strcmp(a, "--inflight")) inflight = atoi(v);
        else if (!strcmp(a, "--timeout")) qp_timeout = atoi(v);
        else if (!strcmp(a, "--linger-ms")) linger_ms = atoi(v);
        else if (!strcmp(a, "--retry-cnt")) retry_cnt = atoi(v);
        else if (!strcmp(a, "--rnr-retry")) rnr_retry = atoi(v);
        else if (!strcmp(a, "--hang-ms")) hang_ms = atoi(v);
        else if (!strcmp(a, "--rnr-after")) rnr_after = atoi(v);
        else if (!strcmp(a, "--tclass")) tclass = atoi(v);
        else if (!strcmp(a, "--odd-tclass")) {
            if (sscanf(v, "%d:%d", &odd_tclass_ch, &odd_tclass) != 2 || odd_tclass < 0 || odd_tclass > 255) usage();
        }
        else if (!strcmp(a, "--link")) {
            /* listen:PORT:CHANNELS or IP:PORT:CHANNELS */
            if (nlinks == MAX_LINKS) usage();
            Link *l = &links[nlinks++];
            char *d = strdup(v), *c1 = strchr(d, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
            if (!c2 || !c2[1] || strlen(c2 + 1) >= sizeof l->chlist) usage();
            *c1 = *c2 = 0;
            l->peer = strcmp(d, "listen") ? d : NULL;
            l->port = atoi(c1 + 1);
            strcpy(l->chlist, c2 + 1);
        }
        else usage();
        i++;
    }
    if (!tally || nreq < 1 || max_size > MAX_REQ || inflight < 1 || inflight > INFLIGHT || qp_timeout < 1 ||
        qp_timeout > 31 || (nlinks && (peer || listen_side)) || retry_cnt < 0 || retry_cnt > 7 || rnr_retry < 0 ||
        rnr_retry > 7 || hang_ms < 1 || tclass > 255 || (odd_tclass_ch >= 0 && tclass < 0))
        usage();
    if (!nlinks) {   /* the classic forms: one link, or none (single host, loopback) */
        Link *l = &links[nlinks++];
        l->peer = peer;
        l->port = port;
        l->fd = -2;   /* -2: no bootstrap at all */
        if (strlen(chlist) >= sizeof l->chlist) usage();
        strcpy(l->chlist, chlist);
        if (peer || listen_side) l->fd = -1;
    } else {
        for (int l = 0; l < nlinks; l++) links[l].fd = -1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t t0 = now_ms();

    /* transport init: telemetry first, as RCCL's init does */
    if (rcclTelemetryInit() < 0) fprintf(stderr, "ibcast_e2e: telemetry could not start; continuing without it\n");

    int ndev = 0;
    struct ibv_device **list = ibv_get_device_list(&ndev);
    if (!list || ndev == 0) die("no RDMA devices");
    struct ibv_device *dev = NULL;
    for (int i = 0; i < ndev; i++)
        if (!strcmp(ibv_get_device_name(list[i]), devname)) dev = list[i];
    if (!dev) die("device %s not found", devname);
    ctx = ibv_open_device(dev);
    if (!ctx) die("ibv_open_device %s", devname);
    if (rcclTelemetryRegisterDevice(DEV, devname, "IB-CAST") != DEV && rcclTelemetryOn())
        fprintf(stderr, "ibcast_e2e: RegisterDevice(%d, %s) failed\n", DEV, devname);
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, ib_port, &pa)) die("ibv_query_port");
    path_mtu = pa.active_mtu;
    mtu_bytes = 128u << path_mtu;
    my_lid = pa.lid;
    if (ibv_query_gid(ctx, ib_port, gid_index, &my_gid)) die("ibv_query_gid %d", gid_index);
    pd = ibv_alloc_pd(ctx);
    if (!pd) die("ibv_alloc_pd");

    int boot = links[0].fd != -2;
    for (int l = 0; l < nlinks; l++)
        if (boot) links[l].fd = bootstrap_connect(links[l].peer, links[l].port, links[l].peer == NULL);
    my_tag = (uint32_t)(nlinks > 1 ? 3000 : links[0].peer ? 2000 : 1000) + (uint32_t)rank;
    if (!boot) my_tag = 500 + (uint32_t)rank;

    /* channels per link: "0,3,17"; data QPs per connection alternate 2, 3, 2, ... */
    for (int l = 0; l < nlinks; l++) {
        links[l].first = nchan;
        char *dup = strdup(links[l].chlist), *save = NULL;
        for (char *tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            if (nchan == MAX_CH) die("too many channels");
            Chan *ch = &chans[nchan];
            ch->id = atoi(tok);
            for (int j = 0; j < nchan; j++)
                if (chans[j].id == ch->id) die("channel %d given twice", ch->id);
            ch->link = l;
            ch->index_forms = ch->id == index_ch;
            ch->t = &T.ch[nchan];
            ch->t->id = ch->id;
            int ndata = 2 + (nchan % 2);
            comm_create(ch, &ch->send, 1, ndata, nreq);
            comm_create(ch, &ch->recv, 0, ndata, nreq);
            ch->h = rcclTelemetryResolveChannel(DEV, ch->id);
            nchan++;
        }
        free(dup);
        links[l].nch = nchan - links[l].first;
    }
    T.nch = nchan;

    uint32_t peer_tag = exchange_and_connect();
    all_barrier();   /* every QP of both sides is in RTS before the first write */
    printf("ibcast_e2e: %d channels, %d requests per comm, mtu %u, %d link(s), peer tag %u\n", nchan, nreq, mtu_bytes,
           nlinks, peer_tag);

    /* the proxy loop */
    uint64_t last_change = now_ms();
    long last_sum = -1;
    for (;;) {
        int done = 1;
        long sum = 0;
        for (int i = 0; i < nchan; i++) {
            Chan *ch = &chans[i];
            Comm *r = &ch->recv, *s = &ch->send;
            /* the sender looks at its FIFO before the receiver publishes: the
             * first look at every slot can miss, as on a real proxy thread */
            send_try_post(s);
            progress(s);
            recv_try_post(r);
            progress(r);
            if (s->completed == s->nreq && !s->fin_posted) send_fin(s);
            done &= r->completed == r->nreq && r->fin_done && s->completed == s->nreq && s->fin_done;
            sum += r->completed + s->completed + r->posted + s->posted + r->fin_done + s->fin_done;
        }
        if (done) break;
        if (sum != last_sum) { last_sum = sum; last_change = now_ms(); }
        /* a fault scenario: the hang (after errors, or with nothing in flight on a dead path) */
        else if (expect_errors && now_ms() - last_change > (uint64_t)hang_ms) break;
        else if (now_ms() - last_change > 30000) die("no progress for 30 s");
    }
    if (expect_errors) {
        /* A fault scenario: the run is what it is now. The peers may be hung too, so no
         * barrier and no teardown: the tally, then either stay (hung, until killed: the file
         * on disk is then the library's snapshot) or exit (the final file). */
        for (int i = 0; i < nchan; i++)   /* what comm_close would hand over */
            rcclTelemetryAddCqPolls(DEV, chans[i].send.polls + chans[i].recv.polls);
        uint64_t ms = now_ms() - t0;
        write_tally(tally, !boot ? "single" : nlinks > 1 ? "trio" : "pair", rank, nreq, ms);
        int all_done = 1;
        for (int i = 0; i < nchan; i++)
            all_done &= chans[i].recv.completed == chans[i].recv.nreq && chans[i].send.completed == chans[i].send.nreq;
        printf("ibcast_e2e: %s after %llu error completions in %llu ms\n", all_done ? "done" : "hung",
               (unsigned long long)errors_seen, (unsigned long long)ms);
        fflush(stdout);
        if (hang)
            for (;;) pause();
        return 0;
    }
    if (error_probe) {
        /* Provoke one real error completion after all traffic: an RDMA_WRITE with a
         * wrong rkey (a plain write: one with immediate would wait for a receive WQE
         * and be RNR-retried forever before the rkey is even looked at). The responder NAKs it, the requester gets IBV_WC_REM_ACCESS_ERR
         * and both QPs of that pair go to the error state; nothing else is outstanding
         * on them, so no flush completions follow. */
        Chan *ch = &chans[0];
        Comm *c = &ch->send;
        Qp *qp = &c->data[0];
        struct ibv_sge sge = {.addr = (uintptr_t)c->buf, .length = 64, .lkey = c->buf_mr->lkey};
        struct ibv_send_wr wr = {.wr_id = mkid(K_PROBE, 0, 0), .sg_list = &sge, .num_sge = 1,
                                 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED};
        wr.wr.rdma.remote_addr = ch->recv.rfifo_addr;   /* any address: the key is what is wrong */
        wr.wr.rdma.rkey = 0x00badbadu;
        (void)t_post_ts(qp);
        t_send_posted(ch, qp, 0);
        rcclTelemetryWqeSize(DEV, 64);
        post_send(c, qp, &wr);
        uint64_t t1 = now_ms();
        while (!probe_done) {
            progress(c);
            if (now_ms() - t1 > 30000) die("the error probe got no completion in 30 s");
        }
        T.recv_pkts_min += 1;   /* the peer runs the same probe against our responder */
        printf("ibcast_e2e: error probe: IBV_WC_REM_ACCESS_ERR as intended\n");
    }
    all_barrier();   /* the peers have drained too: safe to tear the QPs down */
    for (int i = 0; i < nchan; i++) {
        comm_close(&chans[i].send);
        comm_close(&chans[i].recv);
    }
    for (int l = 0; l < nlinks; l++)
        if (links[l].fd >= 0) close(links[l].fd);
    uint64_t ms = now_ms() - t0;
    write_tally(tally, !boot ? "single" : nlinks > 1 ? "trio" : "pair", rank, nreq, ms);
    printf("ibcast_e2e: done in %llu ms: %llu payload bytes checked, %llu bad; %llu tx / %llu rx bytes; "
           "%llu CQ polls\n", (unsigned long long)ms, (unsigned long long)T.payload_checked,
           (unsigned long long)T.payload_errors, (unsigned long long)T.tx_bytes, (unsigned long long)T.rx_bytes,
           (unsigned long long)T.cq_polls);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    ibv_free_device_list(list);
    /* --linger-ms: stay alive (idle) so the live textfile outlives a fault's recovery */
    if (linger_ms > 0) usleep((useconds_t)linger_ms * 1000);
    if (T.payload_errors) return 1;
    return 0;   /* the library writes its JSON from its atexit handler */
}
