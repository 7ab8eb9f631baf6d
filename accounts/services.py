"""People and their roles, as admins manage them on the People page (and scripts may): every change is in the
activity log with who made it."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from activity.services import record

from .roles import ADMIN, ALL_ROLES, role_names

User = get_user_model()


class PeopleError(ValueError):
    """Refused input, with the form field it concerns."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _roles(roles: list[str]) -> list[str]:
    unknown = sorted(set(roles) - set(ALL_ROLES))
    if unknown:
        named = ", ".join(role[:40] for role in unknown)
        raise PeopleError("roles", f"no such role: {named} (one of {', '.join(ALL_ROLES)})")
    return [role for role in ALL_ROLES if role in roles]


@transaction.atomic
def person_create(
    *, username: str, password: str, roles: list[str], actor: AbstractBaseUser | None, email: str = ""
) -> AbstractBaseUser:
    """A new person who can log in with `password`, with `roles` (annotator, adjudicator, admin). Refused, naming
    the field: a username Django would not accept or already taken, a password the password rules refuse, an e-mail
    address that is not one, a role that does not exist. Nothing is stored when refused."""
    field = User._meta.get_field(User.USERNAME_FIELD)
    username = username.strip()
    if not username:
        raise PeopleError("username", "required")
    if len(username) > field.max_length:
        raise PeopleError("username", f"at most {field.max_length} characters")
    try:
        User.username_validator(username)
    except ValidationError as exc:
        raise PeopleError("username", " ".join(exc.messages)) from exc
    if User.objects.filter(**{f"{User.USERNAME_FIELD}__iexact": username}).exists():
        raise PeopleError("username", f"{username!r} is taken")
    email = email.strip()
    if email:
        try:
            validate_email(email)
        except ValidationError as exc:
            raise PeopleError("email", " ".join(exc.messages)) from exc
    roles = _roles(roles)
    try:
        validate_password(password, user=User(username=username, email=email))
    except ValidationError as exc:
        raise PeopleError("password", " ".join(exc.messages)) from exc
    user = User.objects.create_user(username=username, email=email, password=password)
    user.groups.set(Group.objects.get_or_create(name=role)[0] for role in roles)
    record("person.create", f"{username} added with roles {', '.join(roles) or 'none'}", actor=actor,
           username=username, roles=roles)  # fmt: skip
    return user


@transaction.atomic
def person_set_roles(*, person: AbstractBaseUser, roles: list[str], actor: AbstractBaseUser | None) -> list[str]:
    """Give `person` exactly `roles`; returns them. An admin cannot take their own admin role away (nobody would be
    left to give it back on this page)."""
    roles = _roles(roles)
    before = sorted(role_names(person) & set(ALL_ROLES), key=ALL_ROLES.index)
    if actor is not None and person.pk == actor.pk and ADMIN in before and ADMIN not in roles:
        raise PeopleError("roles", "you cannot take your own admin role away: ask another admin")
    keep = person.groups.exclude(name__in=ALL_ROLES)
    person.groups.set([*keep, *(Group.objects.get_or_create(name=role)[0] for role in roles)])
    person._parallax_roles = None  # read again on the next question
    if before != roles:
        record("person.roles", f"{person.get_username()}: roles {', '.join(before) or 'none'} → "
               f"{', '.join(roles) or 'none'}", actor=actor, username=person.get_username(), before=before,
               after=roles)  # fmt: skip
    return roles
