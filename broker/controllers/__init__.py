"""kube-controller-manager's controllers in virtual time (Job, ReplicaSet, Deployment) on
one base, and what they share (ownership, victims)."""
