// Package homeserver is the one interface over the real homeservers Lisa
// is tested against: Dendrite (devkit/dendrite) and Synapse
// (devkit/synapse). [Server] is what an end-to-end test or `lisa-chaos`
// needs from either; [Launch] starts one by name ([Dendrite], [Synapse]),
// and [DendriteServer] and [SynapseServer] adapt an already launched server
// without changing its behaviour. [ParseNames] reads a list such as
// LISA_HOMESERVERS="dendrite,synapse".
//
// Like the rest of devkit it never imports testing; testkit/homeserver adds
// Start and Each for tests. The behaviour that differs between servers and
// that tests must expect is exposed, not hidden: [Server.TxnIDsSurviveRestart]
// says whether a send repeated with the same transaction ID after
// [Server.Restart] returns the original event (Synapse) or creates a new one
// (Dendrite).
package homeserver
