# Sourced by guest scripts: adds the soft-RoCE device rxe0 on eth0 and waits until its port is
# active and GID 1 holds the IPv4 address (RoCE v2, ::ffff:a.b.c.d).
rdma link add rxe0 type rxe netdev eth0
for attempt in $(seq 100); do
  if ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE &&
     grep -q ':ffff:' /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null; then
    return 0
  fi
  sleep 0.1
done
echo "rxe0 did not come up" >&2
return 1
