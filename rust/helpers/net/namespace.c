// SPDX-License-Identifier: GPL-2.0

#include <linux/netdevice.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/udp_tunnel.h>

__rust_helper struct net *rust_helper_get_net(struct net *net)
{
	return get_net(net);
}

__rust_helper struct net *rust_helper_maybe_get_net(struct net *net)
{
	return maybe_get_net(net);
}

__rust_helper void rust_helper_put_net(struct net *net)
{
	put_net(net);
}

__rust_helper void *rust_helper_net_generic(const struct net *net, unsigned int id)
{
	return net_generic(net, id);
}

__rust_helper struct net *rust_helper_dev_net_rcu(const struct net_device *dev)
{
	return dev_net_rcu(dev);
}

#if IS_ENABLED(CONFIG_RUST_RDMA_ABSTRACTIONS)
/* Only with the users of kernel::net::udp_tunnel, which make UDP tunnels (and IPv6) built in. */
__rust_helper int rust_helper_udp_sock_create(struct net *net, struct udp_port_cfg *cfg,
					      struct socket **sockp)
{
	return udp_sock_create(net, cfg, sockp);
}
#endif
