from webapp.roles import Role, user_roles


def roles(request):
    """`roles` (set of role names) for templates that show what a user may do."""
    held = user_roles(request.user) if hasattr(request, "user") else set()
    return {"roles": {r.value for r in held}, "Role": Role}
