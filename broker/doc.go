// Package broker is frontdoor's session broker: the domain model of a site (zones, machines,
// delivery groups, resources, users and user groups, federation sites, sessions) and the
// algorithm that places a launch on a machine.
//
// The rules are those of the Citrix and Horizon brokers it stands in for (Citrix zone
// preference and zones, Horizon preferred sites):
//
//   - the preferred zone of a launch (ApplicationHome, UserHome | UserHomeOnly, UserLocation, per
//     delivery group), the user's home zone (the account's own, else one group's, else a stable
//     hash choice among several groups);
//   - the five-step launch order (1a, 1b, 2a, 2b, ...) and the session reconnection modes;
//   - the Citrix load index (0..10000) with least-loaded or vertical placement, maintenance and
//     down machines;
//   - Horizon site search for global resources, with preferred sites and a load threshold.
//
// The broker is pure logic: it has no network code and no clock of its own (the caller injects
// now). Live state is kept behind the Store interface; a launch is one atomic Store step (check
// the machine's capacity and create the session), which an etcd transaction can express.
//
// Machines are indexed by delivery group × zone in load-ordered buckets, so a decision never
// scans every machine of the site.
package broker
