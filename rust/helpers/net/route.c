// SPDX-License-Identifier: GPL-2.0

#include <net/dst.h>
#include <net/ip6_fib.h>

__rust_helper struct dst_entry *rust_helper_dst_check(struct dst_entry *dst, u32 cookie)
{
	return dst_check(dst, cookie);
}

#if IS_ENABLED(CONFIG_IPV6)
__rust_helper u32 rust_helper_rt6_get_cookie(const struct rt6_info *rt)
{
	return rt6_get_cookie(rt);
}
#endif

__rust_helper struct dst_entry *rust_helper_skb_dst(const struct sk_buff *skb)
{
	return skb_dst(skb);
}

__rust_helper struct net *rust_helper_dev_net(const struct net_device *dev)
{
	return dev_net(dev);
}
