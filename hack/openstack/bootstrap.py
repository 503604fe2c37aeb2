"""Creates what the lane's tests need in its OpenStack, idempotently.

    bootstrap.py identity   # after Keystone: projects, users, services
    bootstrap.py resources  # after the rest: flavor, image, networks, quotas

Run by up.sh inside the namespace with /usr/bin/python3 (Debian's
openstacksdk), as the egress-admin cloud of $OS_CLIENT_CONFIG_FILE.
Every step finds before it creates, so a second run changes nothing.
Prints KEY=VALUE lines up.sh reads (the networks' IDs).
"""
import os
import sys

import openstack

env = os.environ
IP = env["OS_IP"]
REGION = env["OS_REGION"]
PASSWORD = env["OS_PASSWORD"]

# Catalogue: service type, name, endpoint URL (public interface only;
# every client here is told valid_interfaces = public).
SERVICES = [
    ("image", "glance", f"http://{IP}:9292"),
    ("placement", "placement", f"http://{IP}:8778"),
    ("network", "neutron", f"http://{IP}:9696"),
    ("compute", "nova", f"http://{IP}:8774/v2.1"),
]


def project(conn, name):
    p = conn.identity.find_project(name, domain_id="default")
    return p or conn.identity.create_project(name=name, domain_id="default")


def user(conn, name, proj, role):
    u = conn.identity.find_user(name, domain_id="default")
    if u is None:
        u = conn.identity.create_user(name=name, password=PASSWORD, domain_id="default",
                                      default_project_id=proj.id)
    r = conn.identity.find_role(role)
    if not conn.identity.validate_user_has_project_role(proj, u, r):
        conn.identity.assign_project_role_to_user(proj, u, r)
    return u


def identity(conn):
    service = project(conn, "service")
    egress = project(conn, env["OS_PROJECT"])
    # The tests' user: the member role only, in its project.
    user(conn, env["OS_MEMBER_USER"], egress, "member")
    for typ, name, url in SERVICES:
        user(conn, name, service, "admin")
        svc = conn.identity.find_service(name)
        if svc is None:
            svc = conn.identity.create_service(name=name, type=typ)
        if not list(conn.identity.endpoints(service_id=svc.id, interface="public")):
            conn.identity.create_endpoint(service_id=svc.id, interface="public", url=url,
                                          region_id=REGION)


def resources(conn):
    egress = conn.identity.find_project(env["OS_PROJECT"], domain_id="default")
    if conn.compute.find_flavor(env["OS_FLAVOR"]) is None:
        conn.compute.create_flavor(name=env["OS_FLAVOR"], vcpus=1, ram=512, disk=1, is_public=True)
    if conn.image.find_image(env["OS_IMAGE"]) is None:
        # A tiny qcow2 made locally (up.sh): the fake driver never boots it.
        conn.create_image(env["OS_IMAGE"], filename=env["OS_IMAGE_FILE"], disk_format="qcow2",
                          container_format="bare", visibility="public", wait=True,
                          use_import=False)
    net = conn.network.find_network(env["OS_NETWORK"], project_id=egress.id)
    if net is None:
        net = conn.network.create_network(name=env["OS_NETWORK"], project_id=egress.id)
    if not list(conn.network.subnets(network_id=net.id)):
        conn.network.create_subnet(name=env["OS_NETWORK"] + "-v4", network_id=net.id,
                                   project_id=egress.id, ip_version=4,
                                   cidr=env["OS_SUBNET_CIDR"])
    # The external network floating IPs come from: flat on physnet
    # "external" (config.sh), shared by every project as an external
    # network is; the tests route their project's network to it.
    ext = conn.network.find_network(env["OS_EXTERNAL_NETWORK"])
    if ext is None:
        ext = conn.network.create_network(name=env["OS_EXTERNAL_NETWORK"], is_router_external=True,
                                          provider_network_type="flat",
                                          provider_physical_network="external")
    if not list(conn.network.subnets(network_id=ext.id)):
        conn.network.create_subnet(name=env["OS_EXTERNAL_NETWORK"] + "-v4", network_id=ext.id,
                                   ip_version=4, cidr=env["OS_EXTERNAL_CIDR"], is_dhcp_enabled=False)
    # The project's network routed to the external one, as a cloud's
    # self-service network is: a floating IP is associated only with a
    # port whose subnet a router joins to the floating IP's network
    # (neutron/db/l3_db.py get_router_for_floatingip). The operator's
    # test on this cloud uses it (docs/testing.md).
    router = conn.network.find_router(env["OS_NETWORK"], project_id=egress.id)
    if router is None:
        router = conn.network.create_router(name=env["OS_NETWORK"], project_id=egress.id,
                                            external_gateway_info={"network_id": ext.id})
        subnet = next(conn.network.subnets(network_id=net.id))
        conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    # Low enough for a test to reach: instances 5 (cores and RAM match
    # five of the flavor).
    conn.set_compute_quotas(egress.id, instances=5, cores=5, ram=5 * 512)
    print(f"NETWORK_ID={net.id}")
    print(f"EXTERNAL_NETWORK_ID={ext.id}")
    print(f"PROJECT_ID={egress.id}")


def main():
    conn = openstack.connect(cloud="egress-admin")
    {"identity": identity, "resources": resources}[sys.argv[1]](conn)


if __name__ == "__main__":
    main()
