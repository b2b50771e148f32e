# A snapshot is imported by its ID.
terraform import differently_snapshot.golden snap_01JD6Y4W3ZP2Q8Y5V0T7X9K3MN
